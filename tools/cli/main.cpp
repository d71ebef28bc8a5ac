// troupe: command-line front end of libtroupe.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
    CLI::App app{"troupe: run a team of LLM agents on one device"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "troupe 0.1.0");
    troupe::cli::add_inspect_command(app);
    troupe::cli::add_generate_command(app);
    troupe::cli::add_perplexity_command(app);
    troupe::cli::add_batch_command(app);
    troupe::cli::add_tokenize_command(app);
    troupe::cli::add_run_command(app);
    troupe::cli::add_lint_command(app);
    troupe::cli::add_bench_command(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const troupe::Error& e) {
        std::fprintf(stderr, "troupe: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "troupe: internal error: %s\n", e.what());
        return 2;
    }
    return 0;
}

// `troupe tokenize` end to end, on the bundled model.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct CliRun {
    int status = -1;
    std::string out;
};

// Runs the CLI with `args` (already shell-quoted), capturing stdout; stderr goes to stdout
// when `merge_stderr`.
CliRun run_cli(const std::string& args, bool merge_stderr = false) {
    const std::string cmd =
        std::string(TROUPE_CLI_PATH) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
    CliRun r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf;
    for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

const std::string kModel = std::string("-m ") + TROUPE_SOURCE_DIR + "/models/troupe-tiny-q8_0.gguf";

TEST(TokenizeCli, PrintsIdsAsOneJsonArray) {
    EXPECT_EQ(run_cli("tokenize " + kModel + " -p 'Hello world' --ids").out, "[1, 15043, 3186]\n");
    EXPECT_EQ(run_cli("tokenize " + kModel + " -p 'Hello world' --ids --no-bos").out,
              "[15043, 3186]\n");
    EXPECT_EQ(run_cli("tokenize " + kModel + " -p '' --ids").out, "[1]\n");
}

TEST(TokenizeCli, ParsesSpecialTokensOnlyWhenAsked) {
    EXPECT_EQ(run_cli("tokenize " + kModel + " -p '</s>' --ids --no-bos --parse-special").out,
              "[2]\n");
    EXPECT_NE(run_cli("tokenize " + kModel + " -p '</s>' --ids --no-bos").out, "[2]\n");
}

TEST(TokenizeCli, PrintsIdAndPiecePerLine) {
    const CliRun r = run_cli("tokenize " + kModel + " -p 'Hello world'");
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, "     1 -> '<s>'\n 15043 -> ' Hello'\n  3186 -> ' world'\n");
}

TEST(TokenizeCli, ReportsErrorsOnOneLine) {
    const CliRun missing = run_cli("tokenize -m /nonexistent.gguf -p x", true);
    EXPECT_EQ(missing.status, 1);
    EXPECT_NE(missing.out.find("troupe: error:"), std::string::npos) << missing.out;
    const CliRun no_text = run_cli("tokenize " + kModel, true);
    EXPECT_NE(no_text.status, 0);
}

}  // namespace

// Runs the troupe binary as a user would and captures its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace troupe::test {

struct CliResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

inline std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

inline CliResult run_cli(const std::vector<std::string>& args) {
    char err_path[] = "/tmp/troupe-cli-err-XXXXXX";
    const int fd = mkstemp(err_path);
    if (fd >= 0) close(fd);
    std::string cmd = shell_quote(TROUPE_CLI_PATH);
    for (const std::string& a : args) {  // appended piecewise: GCC 12's -Wrestrict misfires
        cmd += ' ';                         // on `" " + std::string&&`
        cmd += shell_quote(a);
    }
    cmd += " 2>";
    cmd += shell_quote(err_path);
    CliResult r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream in(err_path);
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    std::remove(err_path);
    return r;
}

inline std::string bundled_model() {
    return std::string(TROUPE_SOURCE_DIR) + "/models/troupe-tiny-q8_0.gguf";
}

}  // namespace troupe::test

#include "input_flags.h"

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace troupe::cli {

workflow::InputValues parse_input_flags(const std::vector<std::string>& flags) {
    workflow::InputValues values;
    for (const std::string& f : flags) {
        const size_t eq = f.find('=');
        if (eq == std::string::npos || eq == 0)
            throw Error("--input '" + f + "': expected NAME=VALUE or NAME=@FILE");
        std::string name = f.substr(0, eq), value = f.substr(eq + 1);
        if (!value.empty() && value[0] == '@') {
            const std::string path = value.substr(1);
            std::ifstream in(path, std::ios::binary);
            if (!in) throw Error("--input " + name + ": cannot read '" + path + "'");
            std::ostringstream text;
            text << in.rdbuf();
            value = text.str();
            if (!value.empty() && value.back() == '\n') value.pop_back();
        }
        values[name] = std::move(value);
    }
    return values;
}

}  // namespace troupe::cli

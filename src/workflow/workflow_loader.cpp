#include "workflow/workflow_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "util/error.h"
#include "workflow/workflow_validate.h"
#include "workflow/yaml_reader.h"

namespace troupe::workflow {

namespace {

const std::vector<std::string> kTopKeys = {"name",     "description", "prefix_version", "inputs",
                                           "defaults", "shared",      "agents",         "tasks"};
const std::vector<std::string> kSettingKeys = {"sampling", "max_tokens", "priority", "timeout_s",
                                               "retries",  "fallback",   "stop"};
const std::vector<std::string> kSamplingKeys = {"temperature",
                                                "top_k",
                                                "top_p",
                                                "min_p",
                                                "repeat_penalty",
                                                "repeat_last_n",
                                                "frequency_penalty",
                                                "presence_penalty",
                                                "seed"};
const std::vector<std::string> kInputKeys = {"default", "description"};
const std::vector<std::string> kSharedKeys = {"name", "text"};
const std::vector<std::string> kTaskKeys = {"id", "agent", "prompt", "depends_on", "priority"};

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Builds a Workflow from the document, reporting every problem to the reader's Diagnostics.
class Loader {
  public:
    Loader(YamlReader& r, Workflow& wf) : r_(r), wf_(wf) {}

    void load(const YAML::Node& root) {
        const std::string item = "workflow";
        if (!root.IsMap()) {
            r_.diag().error(r_.loc(root.Mark()), item,
                            "the file must be a mapping with keys shared, agents, tasks (got " +
                                describe(root) + ")");
            return;
        }
        r_.check_keys(root, kTopKeys, item);
        if (auto f = r_.field(root, "name", item); f.present())
            if (auto s = r_.text(f)) wf_.name = *s;
        if (auto f = r_.field(root, "description", item); f.present())
            if (auto s = r_.text(f)) wf_.description = *s;
        if (auto f = r_.field(root, "prefix_version", item); f.present())
            if (auto s = r_.text(f)) wf_.prefix_version = *s;
        if (auto f = r_.field(root, "inputs", item); f.present() && !f.is_null()) load_inputs(f);
        AgentSettings defaults;
        if (auto f = r_.field(root, "defaults", item); f.present() && r_.expect_map(f)) {
            r_.check_keys(f.node, kSettingKeys, "defaults");
            load_settings(f.node, "defaults", defaults);
        }
        if (auto f = r_.field(root, "shared", item); f.present() && !f.is_null())
            load_list(f, [&](const YAML::Node& n) { load_shared(n); });
        if (auto f = require(root, "agents", item); f.present())
            load_list(f, [&](const YAML::Node& n) { load_agent(n, defaults); });
        if (auto f = require(root, "tasks", item); f.present())
            load_list(f, [&](const YAML::Node& n) { load_task(n); });
    }

  private:
    Field require(const YAML::Node& map, const std::string& key, const std::string& item) {
        Field f = r_.field(map, key, item);
        if (!f.present())
            r_.diag().error(r_.loc(map.Mark()), item, "missing required key '" + key + "'");
        return f;
    }

    template <class Fn>
    void load_list(const Field& f, Fn&& each) {
        if (!r_.expect_sequence(f)) return;
        for (const YAML::Node& n : f.node) {
            if (n.IsMap()) {
                each(n);
                continue;
            }
            r_.diag().error(r_.loc(n.Mark()), "'" + f.key + "' item",
                            "must be a mapping, got " + describe(n));
        }
    }

    // The item's name for messages, e.g. "agent 'planner'" (or "agent #2" without a name).
    std::string item_name(const YAML::Node& n, const char* kind, const char* key, size_t index) {
        const YAML::Node v = n[key];
        if (v.IsDefined() && v.IsScalar()) return std::string(kind) + " '" + v.Scalar() + "'";
        return std::string(kind) + " #" + std::to_string(index + 1);
    }

    void load_inputs(const Field& f) {
        if (!r_.expect_map(f)) return;
        for (const YamlReader::Entry& e : r_.entries(f.node)) {
            Input in;
            in.name = e.key;
            in.loc = e.loc;
            const std::string item = "input '" + e.key + "'";
            if (e.value.IsMap()) {
                r_.check_keys(e.value, kInputKeys, item);
                if (auto d = r_.field(e.value, "default", item); d.present() && !d.is_null())
                    in.default_value = r_.text(d);
                if (auto d = r_.field(e.value, "description", item); d.present())
                    if (auto s = r_.text(d)) in.description = *s;
            } else if (!e.value.IsNull()) {
                Field d{e.value, e.loc, item, "default", true};
                in.default_value = r_.text(d);
            }
            wf_.inputs.push_back(std::move(in));
        }
    }

    void load_shared(const YAML::Node& n) {
        SharedBlock b;
        const std::string item = item_name(n, "shared block", "name", wf_.shared.size());
        r_.check_keys(n, kSharedKeys, item);
        b.loc = r_.loc(n.Mark());
        if (auto f = require(n, "name", item); f.present())
            if (auto s = r_.text(f)) b.name = *s;
        if (auto f = require(n, "text", item); f.present())
            if (auto t = r_.prompt(f)) b.text = std::move(*t);
        wf_.shared.push_back(std::move(b));
    }

    void load_agent(const YAML::Node& n, const AgentSettings& defaults) {
        Agent a;
        const std::string item = item_name(n, "agent", "name", wf_.agents.size());
        r_.check_keys(n, concat({"name", "role"}, kSettingKeys), item);
        a.loc = r_.loc(n.Mark());
        a.settings = defaults;
        if (auto f = require(n, "name", item); f.present())
            if (auto s = r_.text(f)) a.name = *s;
        if (auto f = require(n, "role", item); f.present())
            if (auto t = r_.prompt(f)) a.role = std::move(*t);
        load_settings(n, item, a.settings);
        wf_.agents.push_back(std::move(a));
    }

    void load_task(const YAML::Node& n) {
        Task t;
        const std::string item = item_name(n, "task", "id", wf_.tasks.size());
        r_.check_keys(n, kTaskKeys, item);
        t.loc = r_.loc(n.Mark());
        if (auto f = require(n, "id", item); f.present())
            if (auto s = r_.text(f)) t.id = *s;
        if (auto f = require(n, "agent", item); f.present()) {
            t.agent_loc = f.loc;
            if (auto s = r_.text(f)) t.agent = *s;
        }
        if (auto f = require(n, "prompt", item); f.present())
            if (auto p = r_.prompt(f)) t.prompt = std::move(*p);
        if (auto f = r_.field(n, "depends_on", item); f.present() && !f.is_null()) {
            t.depends_on_loc = f.loc;
            if (f.node.IsScalar()) {
                t.depends_on.push_back(f.node.Scalar());  // one dependency, written bare
            } else if (auto l = r_.text_list(f)) {
                t.depends_on = std::move(*l);
            }
        }
        if (auto f = r_.field(n, "priority", item); f.present())
            if (auto v = r_.integer(f, -1000, 1000)) t.priority = int(*v);
        wf_.tasks.push_back(std::move(t));
    }

    void load_settings(const YAML::Node& n, const std::string& item, AgentSettings& s) {
        if (auto f = r_.field(n, "max_tokens", item); f.present())
            if (auto v = r_.integer(f, 1, 32768)) s.max_tokens = int(*v);
        if (auto f = r_.field(n, "priority", item); f.present())
            if (auto v = r_.integer(f, -1000, 1000)) s.priority = int(*v);
        if (auto f = r_.field(n, "timeout_s", item); f.present())
            if (auto v = r_.number(f, 0.001, 86400)) s.timeout_s = *v;
        if (auto f = r_.field(n, "retries", item); f.present())
            if (auto v = r_.integer(f, 0, 10)) s.retries = int(*v);
        if (auto f = r_.field(n, "stop", item); f.present())
            if (auto l = r_.text_list(f)) s.stop = std::move(*l);
        if (auto f = r_.field(n, "fallback", item); f.present()) load_fallback(f, s.fallback);
        if (auto f = r_.field(n, "sampling", item); f.present() && r_.expect_map(f))
            load_sampling(f.node, item + " sampling", s.sampling);
    }

    void load_fallback(const Field& f, Fallback& fb) {
        if (f.node.IsScalar() && (f.node.Scalar() == "skip" || f.node.Scalar() == "none")) {
            fb.kind = f.node.Scalar() == "skip" ? FallbackKind::Skip : FallbackKind::None;
            fb.text.clear();
            return;
        }
        if (f.node.IsMap()) {
            r_.check_keys(f.node, {"text"}, f.item + " fallback");
            Field t = r_.field(f.node, "text", f.item + " fallback");
            if (!t.present()) {
                r_.diag().error(f.loc, f.item, "'fallback' mapping needs a 'text'");
            } else if (auto s = r_.text(t)) {
                fb.kind = FallbackKind::Text;
                fb.text = *s;
            }
            return;
        }
        r_.diag().error(f.loc, f.item,
                        "'fallback' must be skip, none or {text: ...}, got " + describe(f.node));
    }

    void load_sampling(const YAML::Node& n, const std::string& item, SamplingParams& p) {
        r_.check_keys(n, kSamplingKeys, item);
        auto num = [&](const char* key, double lo, double hi, float& out) {
            if (auto f = r_.field(n, key, item); f.present())
                if (auto v = r_.number(f, lo, hi)) out = float(*v);
        };
        auto integer = [&](const char* key, int64_t lo, int64_t hi, auto& out) {
            if (auto f = r_.field(n, key, item); f.present())
                if (auto v = r_.integer(f, lo, hi))
                    out = std::remove_reference_t<decltype(out)>(*v);
        };
        num("temperature", 0, 100, p.temperature);
        integer("top_k", 0, 1000000, p.top_k);
        num("top_p", 0, 1, p.top_p);
        num("min_p", 0, 1, p.min_p);
        num("repeat_penalty", 0.01, 100, p.repeat_penalty);
        integer("repeat_last_n", -1, 1000000, p.repeat_last_n);
        num("frequency_penalty", -100, 100, p.frequency_penalty);
        num("presence_penalty", -100, 100, p.presence_penalty);
        integer("seed", 0, INT64_MAX, p.seed);
    }

    YamlReader& r_;
    Workflow& wf_;
};

}  // namespace

Workflow parse_workflow(std::string_view text, const std::string& file_name) {
    Diagnostics diag;
    Workflow wf;
    wf.file = file_name;
    wf.name = std::filesystem::path(file_name).stem().string();
    YamlReader reader(file_name, text, diag);
    YAML::Node root;
    try {
        root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
        SourceLoc l = reader.loc(e.mark);
        diag.error(l, "workflow", "not valid YAML or JSON: " + e.msg);
        diag.throw_if_any();
    }
    Loader(reader, wf).load(root);
    diag.throw_if_any();  // validation of a half-read file would only add noise
    validate_workflow(wf, diag);
    diag.throw_if_any();
    return wf;
}

Workflow load_workflow(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open workflow file '" + path + "'");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw Error("cannot read workflow file '" + path + "'");
    return parse_workflow(text.str(), path);
}

}  // namespace troupe::workflow

// The environment switches (config/env_switches.cpp): README's table lists the same variables as the
// code's table, with values the switches take; every literal getenv of kx's sources reads a variable of
// the table, and only the parser reads kx's own; the parser takes each switch's values and refuses any
// other with an InvalidArgument error naming the variable and its values, the same way for every switch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/env_switches.hpp"
#include "kx/error.hpp"
#include "kx/kx.hpp"

namespace kx {
namespace {

namespace fs = std::filesystem;
using config::SwitchKind;

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// An environment variable set (or unset, for nullptr) for the life of the guard.
class EnvSetting {
 public:
  EnvSetting(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~EnvSetting() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  EnvSetting(const EnvSetting&) = delete;
  EnvSetting& operator=(const EnvSetting&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The rows of README's "Settings and environment switches" table: for each variable a row names
// (`NAME=value`), the values it shows (that one and each `=value` after it in the row).
std::map<std::string, std::vector<std::string>> readme_switches() {
  const std::string readme = read_file(fs::path(KX_SOURCE_DIR) / "README.md");
  const size_t section = readme.find("\n## Settings and environment switches\n");
  EXPECT_NE(section, std::string::npos) << "README.md has no \"Settings and environment switches\" section";
  if (section == std::string::npos) return {};
  const size_t end = readme.find("\n## ", section + 1);
  std::istringstream lines(readme.substr(section, end == std::string::npos ? std::string::npos : end - section));
  std::map<std::string, std::vector<std::string>> found;
  const std::regex code("`([A-Z][A-Z0-9_]*)?=([^`]*)`");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("|", 0) != 0) continue;
    std::string name;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), code); it != std::sregex_iterator(); ++it) {
      if ((*it)[1].matched) name = (*it)[1];
      if (name.empty()) continue;  // "=value" before any NAME=
      found[name].push_back((*it)[2]);
    }
  }
  return found;
}

std::set<std::string> table_names() {
  std::set<std::string> names;
  for (const config::Switch& s : config::switches()) names.insert(s.name);
  return names;
}

TEST(EnvSwitches, ReadmeListsTheSameVariablesAsTheTable) {
  std::set<std::string> readme;
  for (const auto& [name, values] : readme_switches()) readme.insert(name);
  EXPECT_EQ(readme, table_names()) << "README.md's \"Settings and environment switches\" table and the table of "
                                      "sdk/src/config/env_switches.cpp list other variables";
}

TEST(EnvSwitches, ReadmeShowsValuesTheSwitchesTake) {
  for (const auto& [name, values] : readme_switches()) {
    if (!table_names().count(name)) continue;  // the test above says so
    const config::Switch& s = config::find_switch(name);
    if (s.kind != SwitchKind::Choice && s.kind != SwitchKind::Flag) continue;
    for (const std::string& v : values) {
      EnvSetting set(s.name, v.c_str());
      if (s.kind == SwitchKind::Choice)
        EXPECT_NO_THROW(config::choice(name)) << "README.md shows " << name << "=" << v;
      else
        EXPECT_NO_THROW(config::flag(name)) << "README.md shows " << name << "=" << v;
    }
  }
}

TEST(EnvSwitches, EveryRowSaysWhatItTakesWhatUnsetMeansAndWhatItDoes) {
  for (const config::Switch& s : config::switches()) {
    EXPECT_NE(std::string(s.values), "") << s.name;
    EXPECT_NE(std::string(s.unset), "") << s.name;
    EXPECT_NE(std::string(s.doc), "") << s.name;
    EXPECT_EQ(s.kind == SwitchKind::Engine, std::string(s.name).rfind("KX_", 0) != 0)
        << s.name << ": kx's own switches are KX_*, and are parsed here; the engines' are not";
  }
}

// Each getenv("NAME") of libkx's and the modules' sources: NAME is in the table, and a switch of kx's
// own is read through the parser only (config/env_switches.cpp).
TEST(EnvSwitches, TheSourcesReadNoVariableOutsideTheTable) {
  const std::regex call("getenv\\(\"([^\"]+)\"\\)");
  int reads = 0;
  for (const char* dir : {"sdk/src", "capi/src"}) {
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(fs::path(KX_SOURCE_DIR) / dir)) {
      const std::string ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".cu")) continue;
      if (e.path().filename() == "env_switches.cpp") continue;
      const std::string text = read_file(e.path());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1];
        ++reads;
        ASSERT_TRUE(table_names().count(name)) << e.path() << " reads " << name << ", which is not in the table";
        EXPECT_EQ(config::find_switch(name).kind, SwitchKind::Engine)
            << e.path() << " reads " << name << " with getenv: kx's own switches are read through config::choice, "
            << "flag or path";
      }
    }
  }
  EXPECT_GT(reads, 0) << "no getenv(\"...\") found under " << KX_SOURCE_DIR << ": the scan looks in the wrong place";
}

// The error every switch gives for a value it does not take: "NAME=value: expected <its values>, or
// unset (<the default>)" (`takes`: its values, when given).
void expect_refused(const std::function<void()>& read, const std::string& variable_and_value,
                    const std::string& takes = "") {
  try {
    read();
    ADD_FAILURE() << variable_and_value << " was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument) << e.what();
    const std::string expected =
        variable_and_value + ": expected " + (takes.empty() ? "" : takes + ", or unset (");
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(EnvSwitches, AChoiceTakesItsValuesAndRefusesAnyOther) {
  {
    EnvSetting unset("KX_STEP_GRAPHS", nullptr);
    EXPECT_EQ(config::choice("KX_STEP_GRAPHS"), std::nullopt);
  }
  {
    EnvSetting empty("KX_STEP_GRAPHS", "");
    EXPECT_EQ(config::choice("KX_STEP_GRAPHS"), std::nullopt);
  }
  for (const char* v : {"0", "off", "1", "on", "emulate"}) {
    EnvSetting set("KX_STEP_GRAPHS", v);
    EXPECT_EQ(config::choice("KX_STEP_GRAPHS"), std::optional<std::string_view>(v));
  }
  for (const char* v : {"yes", "Emulate", "2", " 0"}) {
    EnvSetting set("KX_STEP_GRAPHS", v);
    expect_refused([] { config::choice("KX_STEP_GRAPHS"); }, std::string("KX_STEP_GRAPHS=") + v,
                   "0, off, 1, on or emulate");
  }
  EnvSetting set("KX_DATA_STREAMING", "auto");
  expect_refused([] { config::choice("KX_DATA_STREAMING"); }, "KX_DATA_STREAMING=auto", "always");
}

TEST(EnvSwitches, AFlagTakesZeroOffOneOnAndRefusesAnyOther) {
  for (const config::Switch& s : config::switches()) {
    if (s.kind != SwitchKind::Flag) continue;
    {
      EnvSetting unset(s.name, nullptr);
      EXPECT_EQ(config::flag(s.name), std::nullopt) << s.name;
    }
    {
      EnvSetting empty(s.name, "");
      EXPECT_EQ(config::flag(s.name), std::nullopt) << s.name;
    }
    for (const auto& [v, on] : std::vector<std::pair<const char*, bool>>{{"0", false}, {"off", false}, {"1", true}, {"on", true}}) {
      EnvSetting set(s.name, v);
      EXPECT_EQ(config::flag(s.name), std::optional<bool>(on)) << s.name << "=" << v;
    }
    for (const char* v : {"2", "true", "yes", "-1"}) {
      EnvSetting set(s.name, v);
      expect_refused([&] { config::flag(s.name); }, std::string(s.name) + "=" + v, "0, off, 1 or on");
    }
  }
}

TEST(EnvSwitches, APathTakesAnyText) {
  {
    EnvSetting unset("KX_WORKERS_MODULE", nullptr);
    EXPECT_EQ(config::path("KX_WORKERS_MODULE"), "");
  }
  EnvSetting set("KX_WORKERS_MODULE", "/nonexistent/lib kx.so");
  EXPECT_EQ(config::path("KX_WORKERS_MODULE"), "/nonexistent/lib kx.so");
}

TEST(EnvSwitches, AReadOutOfStepWithTheTableIsAnInternalError) {
  const auto status_of = [](const std::function<void()>& read) {
    try {
      read();
    } catch (const Error& e) {
      return e.status();
    }
    return Status::Ok;
  };
  EXPECT_EQ(status_of([] { config::find_switch("KX_NO_SUCH_SWITCH"); }), Status::Internal);
  EXPECT_EQ(status_of([] { config::flag("KX_STEP_GRAPHS"); }), Status::Internal);      // a choice
  EXPECT_EQ(status_of([] { config::choice("KX_CUDNN"); }), Status::Internal);          // a flag
  EXPECT_EQ(status_of([] { config::path("GLOO_SOCKET_IFNAME"); }), Status::Internal);  // the engine's
}

// The strategy's settings and their overrides; a bad value is an error where a model is compiled, the
// same for each switch (KX_STEP_GRAPHS and KX_CUDNN ignored values they did not know before).
TEST(EnvSwitches, TheOverridesOfTheStrategysSettings) {
  Strategy s = Strategy::mirrored({"cpu"});
  s.set_cudnn(false);
  {
    EnvSetting graphs("KX_STEP_GRAPHS", "off");
    EnvSetting streaming("KX_DATA_STREAMING", "always");
    EnvSetting cudnn("KX_CUDNN", "1");
    EXPECT_EQ(s.effective_step_graphs(), StepGraphs::Off);
    EXPECT_EQ(s.effective_data_streaming(), DataStreaming::Always);
    EXPECT_TRUE(s.effective_cudnn());
  }
  {
    EnvSetting graphs("KX_STEP_GRAPHS", nullptr);
    EnvSetting streaming("KX_DATA_STREAMING", nullptr);
    EnvSetting cudnn("KX_CUDNN", nullptr);
    EXPECT_EQ(s.effective_step_graphs(), StepGraphs::Auto);
    EXPECT_EQ(s.effective_data_streaming(), DataStreaming::Auto);
    EXPECT_FALSE(s.effective_cudnn());
  }
  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"KX_STEP_GRAPHS", "yes"}, {"KX_DATA_STREAMING", "never"}, {"KX_CUDNN", "false"}}) {
    EnvSetting bad(name, value);
    Model m = Model::sequential(s, {4});
    m.add_dense(2, Activation::Softmax);
    expect_refused([&] { m.compile(CompileOptions{}); }, std::string(name) + "=" + value);
  }
}

}  // namespace
}  // namespace kx

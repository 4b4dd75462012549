// The environment switches: every environment variable that changes how kx runs, in one table, and
// the one parser of kx's own (KX_*). README's "Settings and environment switches" lists the same names
// (tests/unit/test_env_switches.cpp keeps the two in step).
//
// Every read goes through choice / flag / path below, the same way for every switch: the variable is
// read at each call (no caching: a test may set it between two models), unset and empty mean "not
// set", and a value the switch does not take is an InvalidArgument error naming the variable and the
// values it takes (never ignored). Compiled into libkx and into the engine module (libkx_workers.so).
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kx::config {

enum class SwitchKind {
  Choice,  // one of `values`
  Flag,    // 0 / off or 1 / on (kFlagValues)
  Path,    // any text: a file
  Engine,  // read where the engine code is, as that engine (Gloo, Open MPI) defines it: not parsed here
};

// What every flag takes: 0 and off are false, 1 and on true.
inline constexpr const char* kFlagValues = "0|off|1|on";

struct Switch {
  const char* name;
  SwitchKind kind;
  const char* values;  // Choice and Flag: the values taken, separated by '|'; Path, Engine: what it holds
  const char* unset;   // what kx does when it is not set (the default)
  const char* doc;     // what it does, one line
};

// The table: kx's own switches, then the engines' variables kx reads.
std::span<const Switch> switches();

// The switch of that name. A name not in the table (a call site out of step with it): Internal.
const Switch& find_switch(std::string_view name);

// A Choice switch's value, as spelled in the table; nullopt when unset or empty. Any other value:
// InvalidArgument.
std::optional<std::string_view> choice(std::string_view name);

// A Flag switch: true for 1 / on, false for 0 / off, nullopt when unset or empty. Any other value:
// InvalidArgument.
std::optional<bool> flag(std::string_view name);

// A Path switch's value; "" when unset.
std::string path(std::string_view name);

}  // namespace kx::config

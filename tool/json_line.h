// Every `ddph ... --json` line: one JSON object built with nlohmann/json and
// printed on one line, so that every command's output has one shape and
// non-finite numbers come out as null (printf's "nan" is not JSON).
#pragma once

#include <nlohmann/json.hpp>

namespace ddph::tool {

// Keys print in the order they were added, as the documented shapes list them.
using Json = nlohmann::ordered_json;

// Prints j on one line of stdout, then flushes. NaN and infinities print as
// null; bytes that are not UTF-8 (a file name) as U+FFFD.
void print_json_line(const Json& j);

// v as a JSON number: an integral value (a range bound such as 2^53) as an
// integer printed in full, others as a double; non-finite ones as null.
Json json_number(double v);

}  // namespace ddph::tool

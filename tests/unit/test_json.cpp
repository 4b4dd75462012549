#include <gtest/gtest.h>

#include "io/json.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

TEST(Json, ParsesAndDumpsRoundTrip) {
  const std::string text =
      R"({"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "x\"y\\z\n\u00e9\ud83d\ude00"}, "d": []})";
  const json::Value v = json::parse(text);
  EXPECT_EQ(v.at("a", "t").as_array("a").size(), 6u);
  EXPECT_DOUBLE_EQ(v.at("a", "t").as_array("a")[2].as_number("n"), -300.0);
  EXPECT_EQ(v.at("b", "t").at("c", "b").as_string("c"), "x\"y\\z\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(json::parse(v.dump()).dump(), v.dump());
}

// Python's json writes a float 1.0 as "1.0"; Keras refuses an optimizer whose learning_rate reads back as
// the integer 1, so the numbers kx writes as Keras's floats keep the point.
TEST(Json, ARealNumberKeepsItsPointWhenWhole) {
  EXPECT_EQ(json::Value::real(1.0).dump(), "1.0");
  EXPECT_EQ(json::Value::real(-3.0).dump(), "-3.0");
  EXPECT_EQ(json::Value::real(0.001).dump(), "0.001");
  EXPECT_EQ(json::Value(1.0).dump(), "1");
  EXPECT_EQ(json::parse(json::Value::real(2.0).dump()).as_number("x"), 2.0);
}

TEST(Json, RejectsMalformedInputWithAnOffset) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "\"abc", "tru", "01x", "{\"a\":1,\"a\":2}", "\"\\ud800\"",
                          "[1] 2", "nan", "\"\x01\""}) {
    try {
      json::parse(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("byte"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(json::parse(std::string(10000, '[')), Error);  // deep nesting is refused, not a stack overflow
}

TEST(Json, TypedAccessNamesWhatIsWrong) {
  const json::Value v = json::parse(R"({"units": 2.5})");
  try {
    v.at("units", "Dense").as_int("Dense units");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Dense units"), std::string::npos);
  }
  EXPECT_THROW(v.at("missing", "Dense"), Error);
}

}  // namespace
}  // namespace kx

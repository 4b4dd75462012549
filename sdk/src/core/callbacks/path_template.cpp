#include "core/callbacks/path_template.hpp"

#include <cctype>
#include <cstdio>

#include "kx/error.hpp"

namespace kx::core {
namespace {

// [0][width][.precision]type with type in `types`; returns the printf conversion or "" if invalid.
std::string printf_format(const std::string& spec, const std::string& types, const char* length) {
  size_t i = 0;
  std::string flags;
  if (i < spec.size() && spec[i] == '0') flags = "0", ++i;
  std::string width, precision;
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) width += spec[i++];
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) precision += spec[i++];
    if (precision.empty()) return "";
  }
  if (i + 1 != spec.size() || types.find(spec[i]) == std::string::npos) return "";
  if (width.size() > 2 || precision.size() > 2) return "";  // keeps names short and snprintf bounded
  return "%" + flags + width + (precision.empty() ? "" : "." + precision) + length + spec[i];
}

}  // namespace

PathTemplate::PathTemplate(const std::string& text) : text_(text) {
  require(!text.empty(), Status::InvalidArgument, "the checkpoint path template is empty");
  size_t i = 0;
  std::string literal;
  while (i < text.size()) {
    if (text[i] != '{') {
      if (text[i] == '}') fail(Status::InvalidArgument, "checkpoint path template \"" + text + "\": unmatched '}'");
      literal += text[i++];
      continue;
    }
    const size_t close = text.find('}', i);
    require(close != std::string::npos, Status::InvalidArgument,
            "checkpoint path template \"" + text + "\": unmatched '{'");
    const std::string inside = text.substr(i + 1, close - i - 1);
    const size_t colon = inside.find(':');
    const std::string name = inside.substr(0, colon);
    const std::string spec = colon == std::string::npos ? "" : inside.substr(colon + 1);
    Piece p;
    if (name == "epoch" || name == "step") {
      p.field = name == "epoch" ? Field::Epoch : Field::Step;
      p.text = spec.empty() ? "%lld" : printf_format(spec, "d", "ll");
    } else if (name == "loss" || name == "val_loss") {
      p.field = name == "loss" ? Field::Loss : Field::ValLoss;
      p.text = spec.empty() ? "%g" : printf_format(spec, "feg", "");
    } else {
      fail(Status::InvalidArgument, "checkpoint path template \"" + text + "\": unknown field {" + name +
                                        "} (known: {epoch}, {step}, {loss}, {val_loss})");
    }
    require(!p.text.empty(), Status::InvalidArgument,
            "checkpoint path template \"" + text + "\": bad format \"" + spec + "\" for {" + name + "}");
    if (!literal.empty()) pieces_.push_back({Field::Literal, literal});
    literal.clear();
    pieces_.push_back(std::move(p));
    i = close + 1;
  }
  if (!literal.empty()) pieces_.push_back({Field::Literal, literal});
  require(text.back() != '/', Status::InvalidArgument,
          "checkpoint path template \"" + text + "\" names a directory, not a file");
}

std::string PathTemplate::format(const TemplateValues& v) const {
  std::string out;
  char buf[64];
  for (const Piece& p : pieces_) {
    switch (p.field) {
      case Field::Literal: out += p.text; continue;
      case Field::Epoch: std::snprintf(buf, sizeof buf, p.text.c_str(), static_cast<long long>(v.epoch)); break;
      case Field::Step: std::snprintf(buf, sizeof buf, p.text.c_str(), static_cast<long long>(v.step)); break;
      case Field::Loss: std::snprintf(buf, sizeof buf, p.text.c_str(), v.loss); break;
      case Field::ValLoss: std::snprintf(buf, sizeof buf, p.text.c_str(), v.val_loss); break;
    }
    out += buf;
  }
  return out;
}

bool PathTemplate::matches_file_name(const std::string& name) const {
  // The pieces after the last '/' of the template; each field matches one or more characters other
  // than '/'. Backtracking over at most a few fields.
  std::vector<Piece> tail;
  for (const Piece& p : pieces_) {
    if (p.field == Field::Literal && p.text.find('/') != std::string::npos) {
      tail.clear();
      tail.push_back({Field::Literal, p.text.substr(p.text.rfind('/') + 1)});
    } else {
      tail.push_back(p);
    }
  }
  const auto match = [&](auto&& self, size_t piece, size_t at) -> bool {
    if (piece == tail.size()) return at == name.size();
    const Piece& p = tail[piece];
    if (p.field == Field::Literal)
      return name.compare(at, p.text.size(), p.text) == 0 && self(self, piece + 1, at + p.text.size());
    for (size_t end = at + 1; end <= name.size() && name[end - 1] != '/'; ++end)
      if (self(self, piece + 1, end)) return true;
    return false;
  };
  return name.find('/') == std::string::npos && match(match, 0, 0);
}

}  // namespace kx::core

// A checkpoint path template: "ckpt/ckpt-{epoch:02d}-{loss:.3f}.kx". Fields {epoch}, {step}, {loss},
// {val_loss}, each with an optional printf-like format (integers: [0][width]d; floats:
// [0][width][.precision]f|e|g).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kx::core {

struct TemplateValues {
  int64_t epoch = 0;  // as shown: 1-based
  int64_t step = 0;
  double loss = 0;
  double val_loss = 0;
};

class PathTemplate {
 public:
  // Throws InvalidArgument naming the first bad field or format.
  explicit PathTemplate(const std::string& text);

  std::string format(const TemplateValues& v) const;
  // Whether a file name (no directory) could have come from the file-name part of this template.
  bool matches_file_name(const std::string& name) const;
  const std::string& text() const { return text_; }

 private:
  enum class Field { Literal, Epoch, Step, Loss, ValLoss };
  struct Piece {
    Field field = Field::Literal;
    std::string text;  // the literal, or the printf format of the field
  };
  std::string text_;
  std::vector<Piece> pieces_;
};

}  // namespace kx::core

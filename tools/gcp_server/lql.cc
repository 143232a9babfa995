#include "gcp_server/lql.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <re2/re2.h>

#include <nlohmann/json.hpp>

#include "common/rfc3339.h"

namespace falcon::fake::lql {

using nlohmann::json;

namespace {

// ---------------------------------------------------------------------------------------------
// Text helpers

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// `needle_lower` must already be lower case.
bool icontains(std::string_view hay, std::string_view needle_lower) {
  if (needle_lower.empty()) return true;
  auto it = std::search(hay.begin(), hay.end(), needle_lower.begin(), needle_lower.end(),
                        [](char h, char n) { return lower(h) == n; });
  return it != hay.end();
}

int icompare(std::string_view a, std::string_view b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const char x = lower(a[i]), y = lower(b[i]);
    if (x != y) return static_cast<unsigned char>(x) < static_cast<unsigned char>(y) ? -1 : 1;
  }
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

std::optional<double> parse_number(std::string_view s) {
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Tokens as Cloud Logging's SEARCH() sees them (the LOG_ANALYZER delimiters), lower-cased.
bool is_search_delimiter(char c) {
  static constexpr std::string_view kDelims = "[]<>(){}|!;,'\"*&?+/:=@.-$%\\_`#^~";
  return std::isspace(static_cast<unsigned char>(c)) || kDelims.find(c) != std::string_view::npos;
}

std::vector<std::string> search_tokens(std::string_view text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_search_delimiter(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_search_delimiter(text[i])) ++i;
    if (i > start) out.push_back(to_lower(text.substr(start, i - start)));
  }
  return out;
}

std::string line_column(std::string_view text, std::size_t pos) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return fmt::format("line {}, column {}", line, col);
}

constexpr std::array<std::pair<std::string_view, int>, 9> kSeverities{{{"DEFAULT", 0},
                                                                       {"DEBUG", 100},
                                                                       {"INFO", 200},
                                                                       {"NOTICE", 300},
                                                                       {"WARNING", 400},
                                                                       {"ERROR", 500},
                                                                       {"CRITICAL", 600},
                                                                       {"ALERT", 700},
                                                                       {"EMERGENCY", 800}}};

}  // namespace

std::optional<int> severity_level(std::string_view text) {
  for (const auto& [name, level] : kSeverities) {
    if (iequals(name, text)) return level;
  }
  // Abbreviations that LQL accepts for convenience are not modelled; numbers are.
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && ptr == text.data() + text.size() && !text.empty()) return v;
  return std::nullopt;
}

std::optional<std::string> severity_name(int level) {
  for (const auto& [name, l] : kSeverities) {
    if (l == level) return std::string(name);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// The syntax tree

enum class Op { kEq, kNe, kHas, kLt, kLe, kGt, kGe, kRegex, kNotRegex };

std::string_view op_text(Op op) {
  switch (op) {
    case Op::kEq:
      return "=";
    case Op::kNe:
      return "!=";
    case Op::kHas:
      return ":";
    case Op::kLt:
      return "<";
    case Op::kLe:
      return "<=";
    case Op::kGt:
      return ">";
    case Op::kGe:
      return ">=";
    case Op::kRegex:
      return "=~";
    case Op::kNotRegex:
      return "!~";
  }
  return "?";
}

struct Node {
  enum class Kind { kAll, kAnd, kOr, kNot, kCompare, kExists, kTerm, kSearch, kLogId };
  Kind kind = Kind::kAll;
  std::vector<std::unique_ptr<Node>> children;

  // kCompare / kExists / kSearch(with field)
  std::vector<std::string> path;
  Op op = Op::kEq;
  std::string value;        // literal text (unescaped)
  std::string value_lower;  // lower-cased literal, for case-insensitive matching
  bool is_null = false;     // NULL_VALUE
  std::optional<double> number;
  std::optional<std::int64_t> time;  // for timestamp fields
  std::optional<int> severity;       // for the severity field
  std::shared_ptr<const RE2> regex;  // =~ and !~: RE2, as Cloud Logging's own

  // kSearch: tokens every one of which must be found; phrases (from backticks) must be found
  // as adjacent token runs.
  std::vector<std::string> search_words;
  std::vector<std::vector<std::string>> search_phrases;
};

namespace {

bool is_time_path(const std::vector<std::string>& path) {
  return path.size() == 1 && (path[0] == "timestamp" || path[0] == "receiveTimestamp");
}

bool is_severity_path(const std::vector<std::string>& path) {
  return path.size() == 1 && path[0] == "severity";
}

bool plain_segment(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '@';
  });
}

// A string of the filter as a JSON string literal. Filter text is any bytes a client sent: bytes
// that are not UTF-8 are shown as U+FFFD instead of making json::dump throw.
std::string json_literal(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string path_text(const std::vector<std::string>& path) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i) out += '.';
    if (plain_segment(path[i])) {
      out += path[i];
    } else {
      out += json_literal(path[i]);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Lexer

struct Token {
  enum class Type { kEnd, kLParen, kRParen, kComma, kString, kWord, kOp, kAnd, kOr, kNot, kMinus };
  Type type = Type::kEnd;
  std::size_t pos = 0;                // offset of the first character
  std::size_t end = 0;                // offset one past the last character
  std::string text;                   // string: unescaped content; word: raw text
  std::vector<std::string> segments;  // word: path segments (quoted ones unescaped)
  Op op = Op::kEq;
};

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space_and_comments();
      Token t;
      t.pos = i_;
      if (i_ >= text_.size()) {
        t.type = Token::Type::kEnd;
        t.end = i_;
        out.push_back(std::move(t));
        return out;
      }
      const char c = text_[i_];
      if (c == '(') {
        t.type = Token::Type::kLParen;
        ++i_;
      } else if (c == ')') {
        t.type = Token::Type::kRParen;
        ++i_;
      } else if (c == ',') {
        t.type = Token::Type::kComma;
        ++i_;
      } else if (c == '"') {
        t.type = Token::Type::kString;
        t.text = read_string();
      } else if (c == '-') {
        t.type = Token::Type::kMinus;
        ++i_;
      } else if (const auto op = read_op()) {
        t.type = Token::Type::kOp;
        t.op = *op;
      } else if (is_word_char(c)) {
        read_word(t);
      } else {
        throw error(fmt::format("Unexpected character '{}'", c), i_);
      }
      t.end = i_;
      out.push_back(std::move(t));
    }
  }

 private:
  FilterError error(const std::string& what, std::size_t pos) const {
    return FilterError(fmt::format("Unparseable filter: {} at {}", what, line_column(text_, pos)),
                       pos);
  }

  static bool is_word_char(char c) {
    if (std::isspace(static_cast<unsigned char>(c))) return false;
    static constexpr std::string_view kSpecial = "()\",=!<>:~\\";
    return kSpecial.find(c) == std::string_view::npos;
  }

  void skip_space_and_comments() {
    for (;;) {
      while (i_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[i_]))) ++i_;
      if (i_ + 1 < text_.size() && text_[i_] == '-' && text_[i_ + 1] == '-') {
        while (i_ < text_.size() && text_[i_] != '\n') ++i_;
        continue;
      }
      return;
    }
  }

  std::optional<Op> read_op() {
    auto starts = [&](std::string_view s) { return text_.substr(i_, s.size()) == s; };
    static constexpr std::array<std::pair<std::string_view, Op>, 9> kOps{{{"!=", Op::kNe},
                                                                          {"<=", Op::kLe},
                                                                          {">=", Op::kGe},
                                                                          {"=~", Op::kRegex},
                                                                          {"!~", Op::kNotRegex},
                                                                          {"=", Op::kEq},
                                                                          {":", Op::kHas},
                                                                          {"<", Op::kLt},
                                                                          {">", Op::kGt}}};
    for (const auto& [s, op] : kOps) {
      if (starts(s)) {
        i_ += s.size();
        return op;
      }
    }
    return std::nullopt;
  }

  // At an opening quote; returns the unescaped content and leaves i_ after the closing quote.
  std::string read_string() {
    const std::size_t start = i_;
    ++i_;
    std::string out;
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c == '\\') {
        if (i_ + 1 >= text_.size()) break;
        const char e = text_[i_ + 1];
        switch (e) {
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case '"':
          case '\\':
          case '/':
            out += e;
            break;
          default:
            // Unknown escapes are kept verbatim so that regular expressions such as "\d" and
            // "\." survive (LQL passes them through to RE2).
            out += '\\';
            out += e;
            break;
        }
        i_ += 2;
        continue;
      }
      out += c;
      ++i_;
    }
    throw error("Unterminated string", start);
  }

  // A word, possibly a dotted field path with quoted segments: labels."k8s-pod/app".x
  void read_word(Token& t) {
    t.type = Token::Type::kWord;
    std::string current;
    auto flush = [&] {
      t.segments.push_back(current);
      current.clear();
    };
    for (;;) {
      while (i_ < text_.size() && is_word_char(text_[i_])) {
        const char c = text_[i_];
        t.text += c;
        if (c == '.') {
          flush();
        } else {
          current += c;
        }
        ++i_;
      }
      // `labels."k8s-pod/app"`: a quoted segment right after a dot.
      if (i_ < text_.size() && text_[i_] == '"' && !t.text.empty() && t.text.back() == '.') {
        const std::size_t qstart = i_;
        std::string seg = read_string();
        t.text += std::string(text_.substr(qstart, i_ - qstart));
        t.segments.push_back(std::move(seg));
        current.clear();
        if (i_ < text_.size() && text_[i_] == '.') {
          t.text += '.';
          ++i_;
          if (i_ >= text_.size() || !(is_word_char(text_[i_]) || text_[i_] == '"')) {
            throw error("Field path ends with '.'", i_);
          }
          continue;
        }
        return;
      }
      break;
    }
    flush();
    if (t.text == "AND" && t.segments.size() == 1) t.type = Token::Type::kAnd;
    if (t.text == "OR" && t.segments.size() == 1) t.type = Token::Type::kOr;
    if (t.text == "NOT" && t.segments.size() == 1) t.type = Token::Type::kNot;
  }

  std::string_view text_;
  std::size_t i_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Parser

struct Literal {
  std::string text;
  bool quoted = false;
  bool is_null = false;
  std::size_t pos = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), tokens_(Lexer(text).run()) {}

  std::unique_ptr<Node> parse() {
    if (peek().type == Token::Type::kEnd) return std::make_unique<Node>();  // matches all
    auto root = parse_conjunction();
    if (peek().type != Token::Type::kEnd) throw unexpected(peek());
    return root;
  }

 private:
  using T = Token::Type;

  const Token& peek(std::size_t ahead = 0) const {
    return tokens_[std::min(i_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& t = tokens_[i_];
    if (i_ + 1 < tokens_.size()) ++i_;
    return t;
  }

  FilterError error(const std::string& what, std::size_t pos) const {
    return FilterError(fmt::format("Unparseable filter: {} at {}", what, line_column(text_, pos)),
                       pos);
  }
  FilterError unexpected(const Token& t) const {
    if (t.type == T::kEnd) return error("unexpected end of filter", t.pos);
    return error(fmt::format("unexpected '{}'", text_.substr(t.pos, t.end - t.pos)), t.pos);
  }

  static bool starts_term(const Token& t) {
    switch (t.type) {
      case T::kLParen:
      case T::kString:
      case T::kWord:
      case T::kNot:
      case T::kMinus:
        return true;
      default:
        return false;
    }
  }

  static std::unique_ptr<Node> combine(Node::Kind kind, std::vector<std::unique_ptr<Node>> list) {
    if (list.size() == 1) return std::move(list.front());
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->children = std::move(list);
    return n;
  }

  // conjunction := disjunction { [AND] disjunction }
  std::unique_ptr<Node> parse_conjunction() {
    std::vector<std::unique_ptr<Node>> list;
    list.push_back(parse_disjunction());
    for (;;) {
      if (peek().type == T::kAnd) {
        next();
        if (!starts_term(peek())) throw unexpected(peek());
        list.push_back(parse_disjunction());
      } else if (starts_term(peek())) {
        list.push_back(parse_disjunction());
      } else {
        break;
      }
    }
    return combine(Node::Kind::kAnd, std::move(list));
  }

  // disjunction := unary { OR unary }
  std::unique_ptr<Node> parse_disjunction() {
    std::vector<std::unique_ptr<Node>> list;
    list.push_back(parse_unary());
    while (peek().type == T::kOr) {
      next();
      if (!starts_term(peek())) throw unexpected(peek());
      list.push_back(parse_unary());
    }
    return combine(Node::Kind::kOr, std::move(list));
  }

  // unary := (NOT | '-') unary | primary
  std::unique_ptr<Node> parse_unary() {
    if (peek().type == T::kNot || peek().type == T::kMinus) {
      next();
      if (!starts_term(peek())) throw unexpected(peek());
      auto n = std::make_unique<Node>();
      n->kind = Node::Kind::kNot;
      n->children.push_back(parse_unary());
      return n;
    }
    return parse_primary();
  }

  std::unique_ptr<Node> parse_primary() {
    const Token& t = peek();
    if (t.type == T::kLParen) {
      next();
      if (peek().type == T::kRParen) throw error("empty parentheses", peek().pos);
      auto inner = parse_conjunction();
      if (peek().type != T::kRParen) throw unexpected(peek());
      next();
      return inner;
    }
    if (t.type == T::kString) {
      if (peek(1).type == T::kOp) {
        throw error("a field name cannot be a quoted string", t.pos);
      }
      const Token& s = next();
      return make_term(s.text);
    }
    if (t.type == T::kWord) {
      const Token& w = next();
      if (peek().type == T::kLParen && peek().pos == w.end && w.segments.size() == 1) {
        return parse_function(w);
      }
      if (peek().type == T::kOp) {
        const Token& op = next();
        return parse_comparison_rhs(w, op.op, op.pos);
      }
      return make_term(w.text);
    }
    throw unexpected(t);
  }

  static std::unique_ptr<Node> make_term(const std::string& text) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kTerm;
    n->value = text;
    n->value_lower = to_lower(text);
    return n;
  }

  std::unique_ptr<Node> parse_function(const Token& name) {
    next();  // '('
    std::vector<Token> args;
    while (peek().type != T::kRParen) {
      if (peek().type == T::kEnd) throw unexpected(peek());
      if (!args.empty()) {
        if (peek().type != T::kComma) throw unexpected(peek());
        next();
      }
      const Token& a = next();
      if (a.type != T::kString && a.type != T::kWord) throw unexpected(a);
      args.push_back(a);
    }
    next();  // ')'
    const std::string fname = name.text;
    if (fname == "SEARCH" || fname == "search") {
      auto n = std::make_unique<Node>();
      n->kind = Node::Kind::kSearch;
      const Token* query = nullptr;
      if (args.size() == 1) {
        query = &args[0];
      } else if (args.size() == 2 && args[0].type == T::kWord) {
        n->path = args[0].segments;
        query = &args[1];
      } else {
        throw error("SEARCH takes a string, or a field and a string", name.pos);
      }
      if (query->type != T::kString) throw error("SEARCH needs a quoted string", query->pos);
      compile_search(*n, query->text);
      return n;
    }
    if (fname == "log_id") {
      if (args.size() != 1 || args[0].type != T::kString) {
        throw error("log_id takes one quoted string", name.pos);
      }
      auto n = std::make_unique<Node>();
      n->kind = Node::Kind::kLogId;
      std::string encoded;
      for (char c : args[0].text) {
        if (c == '/') {
          encoded += "%2F";
        } else {
          encoded += c;
        }
      }
      n->value = "/logs/" + encoded;
      return n;
    }
    throw error(fmt::format("unknown function '{}'", fname), name.pos);
  }

  static void compile_search(Node& n, std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
      const std::size_t tick = text.find('`', i);
      const std::string_view plain =
          text.substr(i, tick == std::string_view::npos ? std::string_view::npos : tick - i);
      for (auto& w : search_tokens(plain)) n.search_words.push_back(std::move(w));
      if (tick == std::string_view::npos) break;
      const std::size_t close = text.find('`', tick + 1);
      const std::string_view phrase = text.substr(
          tick + 1, close == std::string_view::npos ? std::string_view::npos : close - tick - 1);
      auto tokens = search_tokens(phrase);
      if (!tokens.empty()) n.search_phrases.push_back(std::move(tokens));
      if (close == std::string_view::npos) break;
      i = close + 1;
    }
  }

  Literal parse_value() {
    const Token& t = peek();
    Literal lit;
    lit.pos = t.pos;
    if (t.type == T::kString) {
      lit.text = next().text;
      lit.quoted = true;
      return lit;
    }
    if (t.type == T::kMinus && peek(1).type == T::kWord && peek(1).pos == t.end) {
      next();
      lit.text = "-" + next().text;
      return lit;
    }
    if (t.type == T::kWord) {
      lit.text = next().text;
      lit.is_null = lit.text == "NULL_VALUE";
      return lit;
    }
    throw error(t.type == T::kEnd ? "missing value after operator"
                                  : fmt::format("expected a value, found '{}'",
                                                text_.substr(t.pos, t.end - t.pos)),
                t.pos);
  }

  std::unique_ptr<Node> parse_comparison_rhs(const Token& field, Op op, std::size_t op_pos) {
    if (op == Op::kHas && peek().type == T::kWord && peek().text == "*") {
      next();
      auto n = std::make_unique<Node>();
      n->kind = Node::Kind::kExists;
      n->path = field.segments;
      return n;
    }
    if (peek().type == T::kLParen) {
      next();
      auto list = parse_value_conjunction(field, op);
      if (peek().type != T::kRParen) throw unexpected(peek());
      next();
      return list;
    }
    (void)op_pos;
    return make_compare(field, op, parse_value());
  }

  // Value lists: `field = ("a" OR "b")`, with the same precedence as expressions.
  std::unique_ptr<Node> parse_value_conjunction(const Token& field, Op op) {
    std::vector<std::unique_ptr<Node>> list;
    list.push_back(parse_value_disjunction(field, op));
    for (;;) {
      if (peek().type == T::kAnd) {
        next();
        list.push_back(parse_value_disjunction(field, op));
      } else if (peek().type == T::kString || peek().type == T::kWord ||
                 peek().type == T::kLParen || peek().type == T::kNot) {
        list.push_back(parse_value_disjunction(field, op));
      } else {
        break;
      }
    }
    return combine(Node::Kind::kAnd, std::move(list));
  }

  std::unique_ptr<Node> parse_value_disjunction(const Token& field, Op op) {
    std::vector<std::unique_ptr<Node>> list;
    list.push_back(parse_value_unary(field, op));
    while (peek().type == T::kOr) {
      next();
      list.push_back(parse_value_unary(field, op));
    }
    return combine(Node::Kind::kOr, std::move(list));
  }

  std::unique_ptr<Node> parse_value_unary(const Token& field, Op op) {
    if (peek().type == T::kNot) {
      next();
      auto n = std::make_unique<Node>();
      n->kind = Node::Kind::kNot;
      n->children.push_back(parse_value_unary(field, op));
      return n;
    }
    if (peek().type == T::kLParen) {
      next();
      auto inner = parse_value_conjunction(field, op);
      if (peek().type != T::kRParen) throw unexpected(peek());
      next();
      return inner;
    }
    return make_compare(field, op, parse_value());
  }

  std::unique_ptr<Node> make_compare(const Token& field, Op op, const Literal& lit) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kCompare;
    n->path = field.segments;
    n->op = op;
    n->value = lit.text;
    n->value_lower = to_lower(lit.text);
    n->is_null = lit.is_null && !lit.quoted;
    if (n->is_null) {
      if (op != Op::kEq && op != Op::kNe) {
        throw error("NULL_VALUE can only be compared with = or !=", lit.pos);
      }
      return n;
    }
    if (op == Op::kRegex || op == Op::kNotRegex) {
      // RE2, the engine Cloud Logging uses: its syntax ((?i) included) and its errors, and
      // matching in time linear in the text whatever the pattern.
      RE2::Options options;
      options.set_log_errors(false);
      auto re = std::make_shared<const RE2>(lit.text, options);
      if (!re->ok()) {
        throw error(fmt::format("invalid regular expression \"{}\": {}", lit.text, re->error()),
                    lit.pos);
      }
      n->regex = std::move(re);
      return n;
    }
    if (is_time_path(n->path) && op != Op::kHas) {
      n->time = tools::parse_rfc3339_nanos(lit.text);
      if (!n->time) {
        throw error(fmt::format("invalid timestamp \"{}\" (expected RFC 3339)", lit.text), lit.pos);
      }
      return n;
    }
    if (is_severity_path(n->path)) n->severity = severity_level(lit.text);
    n->number = parse_number(lit.text);
    return n;
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  std::size_t i_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Evaluation

bool ordered(Op op, int cmp) {
  switch (op) {
    case Op::kLt:
      return cmp < 0;
    case Op::kLe:
      return cmp <= 0;
    case Op::kGt:
      return cmp > 0;
    case Op::kGe:
      return cmp >= 0;
    case Op::kEq:
      return cmp == 0;
    default:
      return false;
  }
}

template <typename V>
int three_way(V a, V b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

std::string scalar_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  return j.dump();
}

bool any_leaf_text(const json& j, const std::function<bool(std::string_view)>& fn) {
  switch (j.type()) {
    case json::value_t::object:
      for (const auto& [k, v] : j.items()) {
        if (any_leaf_text(v, fn)) return true;
      }
      return false;
    case json::value_t::array:
      for (const auto& v : j) {
        if (any_leaf_text(v, fn)) return true;
      }
      return false;
    case json::value_t::string:
      return fn(j.get_ref<const std::string&>());
    case json::value_t::null:
    case json::value_t::discarded:
      return false;
    default:
      return fn(j.dump());
  }
}

// The positive operators (=, :, <, <=, >, >=, =~) against one JSON value.
bool match_value(const Node& n, Op op, const json& j) {
  if (j.is_array()) {
    return std::any_of(j.begin(), j.end(), [&](const json& e) { return match_value(n, op, e); });
  }
  if (n.is_null) return op == Op::kEq && j.is_null();
  if (j.is_null()) return false;
  if (op == Op::kRegex) {
    if (j.is_object()) {
      return any_leaf_text(j, [&](std::string_view s) { return RE2::PartialMatch(s, *n.regex); });
    }
    const std::string s = scalar_text(j);
    return RE2::PartialMatch(s, *n.regex);
  }
  if (j.is_object()) {
    if (op != Op::kHas) return false;
    return any_leaf_text(j, [&](std::string_view s) { return icontains(s, n.value_lower); });
  }
  if (op == Op::kHas) {
    if (j.is_string()) return icontains(j.get_ref<const std::string&>(), n.value_lower);
    return icontains(j.dump(), n.value_lower);
  }
  // =, <, <=, >, >=
  if (n.severity && is_severity_path(n.path)) {
    std::optional<int> level;
    if (j.is_number_integer()) {
      level = j.get<int>();
    } else if (j.is_string()) {
      level = severity_level(j.get_ref<const std::string&>());
    }
    if (level) return ordered(op, three_way(*level, *n.severity));
  }
  if (j.is_boolean()) {
    const std::string_view b = j.get<bool>() ? "true" : "false";
    return op == Op::kEq ? iequals(b, n.value) : ordered(op, icompare(b, n.value));
  }
  if (j.is_number()) {
    if (n.number) return ordered(op, three_way(j.get<double>(), *n.number));
    return ordered(op, icompare(j.dump(), n.value));
  }
  const std::string& s = j.get_ref<const std::string&>();
  if (n.number) {
    if (auto v = parse_number(s)) return ordered(op, three_way(*v, *n.number));
  }
  if (op == Op::kEq) return iequals(s, n.value);
  return ordered(op, icompare(s, n.value));
}

bool eval_compare(const Node& n, const EntryView& v) {
  const bool negated = n.op == Op::kNe || n.op == Op::kNotRegex;
  const Op op = n.op == Op::kNe ? Op::kEq : (n.op == Op::kNotRegex ? Op::kRegex : n.op);
  bool result = false;
  if (is_time_path(n.path)) {
    const auto t = v.time_field(n.path[0]);
    if (!t) {
      result = false;
    } else if (n.time && op != Op::kRegex && op != Op::kHas) {
      result = ordered(op, three_way(*t, *n.time));
    } else {
      const std::string text = tools::format_rfc3339_nanos(*t);
      result =
          op == Op::kRegex ? RE2::PartialMatch(text, *n.regex) : icontains(text, n.value_lower);
    }
  } else if (const json* j = v.find(n.path)) {
    result = match_value(n, op, *j);
  } else if (is_severity_path(n.path) && n.severity) {
    // No severity means DEFAULT.
    result = op != Op::kRegex && op != Op::kHas && ordered(op, three_way(0, *n.severity));
  }
  return negated ? !result : result;
}

// True when every token run `needle` occurs contiguously in `hay`.
bool contains_run(const std::vector<std::string>& hay, const std::vector<std::string>& needle) {
  if (needle.empty()) return true;
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

bool eval_search(const Node& n, const EntryView& v) {
  std::vector<bool> found_words(n.search_words.size(), false);
  std::vector<bool> found_phrases(n.search_phrases.size(), false);
  std::size_t remaining = found_words.size() + found_phrases.size();
  if (remaining == 0) return true;
  auto visit = [&](std::string_view text) {
    const auto tokens = search_tokens(text);
    for (std::size_t i = 0; i < n.search_words.size(); ++i) {
      if (!found_words[i] &&
          std::find(tokens.begin(), tokens.end(), n.search_words[i]) != tokens.end()) {
        found_words[i] = true;
        --remaining;
      }
    }
    for (std::size_t i = 0; i < n.search_phrases.size(); ++i) {
      if (!found_phrases[i] && contains_run(tokens, n.search_phrases[i])) {
        found_phrases[i] = true;
        --remaining;
      }
    }
    return remaining == 0;
  };
  if (n.path.empty()) return v.any_text(visit);
  if (is_time_path(n.path)) {
    const auto t = v.time_field(n.path[0]);
    return t && visit(tools::format_rfc3339_nanos(*t));
  }
  const json* j = v.find(n.path);
  return j && any_leaf_text(*j, visit);
}

bool eval(const Node& n, const EntryView& v) {
  switch (n.kind) {
    case Node::Kind::kAll:
      return true;
    case Node::Kind::kAnd:
      for (const auto& c : n.children) {
        if (!eval(*c, v)) return false;
      }
      return true;
    case Node::Kind::kOr:
      for (const auto& c : n.children) {
        if (eval(*c, v)) return true;
      }
      return false;
    case Node::Kind::kNot:
      return !eval(*n.children.front(), v);
    case Node::Kind::kCompare:
      return eval_compare(n, v);
    case Node::Kind::kExists: {
      if (is_time_path(n.path)) return v.time_field(n.path[0]).has_value();
      const json* j = v.find(n.path);
      return j != nullptr && !j->is_null();
    }
    case Node::Kind::kTerm:
      return v.any_text([&](std::string_view s) { return icontains(s, n.value_lower); });
    case Node::Kind::kSearch:
      return eval_search(n, v);
    case Node::Kind::kLogId: {
      const json* j = v.find({"logName"});
      if (!j || !j->is_string()) return false;
      const std::string& name = j->get_ref<const std::string&>();
      return name.size() >= n.value.size() &&
             name.compare(name.size() - n.value.size(), n.value.size(), n.value) == 0;
    }
  }
  return false;
}

TimeBounds bounds(const Node& n) {
  TimeBounds b;
  switch (n.kind) {
    case Node::Kind::kAnd:
      for (const auto& c : n.children) {
        const TimeBounds cb = bounds(*c);
        b.lo = std::max(b.lo, cb.lo);
        b.hi = std::min(b.hi, cb.hi);
      }
      return b;
    case Node::Kind::kOr: {
      if (n.children.empty()) return b;
      b.lo = std::numeric_limits<std::int64_t>::max();
      b.hi = std::numeric_limits<std::int64_t>::min();
      for (const auto& c : n.children) {
        const TimeBounds cb = bounds(*c);
        if (cb.empty()) continue;
        b.lo = std::min(b.lo, cb.lo);
        b.hi = std::max(b.hi, cb.hi);
      }
      return b;
    }
    case Node::Kind::kCompare: {
      if (n.path.size() != 1 || n.path[0] != "timestamp" || !n.time) return b;
      const std::int64_t t = *n.time;
      constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
      constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
      switch (n.op) {
        case Op::kEq:
          b.lo = b.hi = t;
          break;
        case Op::kGe:
          b.lo = t;
          break;
        case Op::kGt:
          b.lo = t == kMax ? t : t + 1;
          if (t == kMax) b.hi = kMin;
          break;
        case Op::kLe:
          b.hi = t;
          break;
        case Op::kLt:
          b.hi = t == kMin ? t : t - 1;
          if (t == kMin) b.lo = kMax;
          break;
        default:
          break;
      }
      return b;
    }
    default:
      return b;
  }
}

void render(const Node& n, std::string& out) {
  auto list = [&](std::string_view name) {
    out += name;
    out += '(';
    for (std::size_t i = 0; i < n.children.size(); ++i) {
      if (i) out += ", ";
      render(*n.children[i], out);
    }
    out += ')';
  };
  switch (n.kind) {
    case Node::Kind::kAll:
      out += "ALL";
      return;
    case Node::Kind::kAnd:
      list("AND");
      return;
    case Node::Kind::kOr:
      list("OR");
      return;
    case Node::Kind::kNot:
      list("NOT");
      return;
    case Node::Kind::kCompare:
      out += path_text(n.path);
      out += op_text(n.op);
      out += n.is_null ? std::string("NULL_VALUE") : json_literal(n.value);
      return;
    case Node::Kind::kExists:
      out += path_text(n.path) + ":*";
      return;
    case Node::Kind::kTerm:
      out += "TERM(" + json_literal(n.value) + ")";
      return;
    case Node::Kind::kSearch: {
      out += "SEARCH(";
      if (!n.path.empty()) out += path_text(n.path) + ", ";
      json words = n.search_words;
      json phrases = n.search_phrases;
      out += json_literal(words);
      if (!n.search_phrases.empty()) out += ", " + json_literal(phrases);
      out += ')';
      return;
    }
    case Node::Kind::kLogId:
      out += "LOG_ID(" + json_literal(n.value) + ")";
      return;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Filter

Filter::Filter() : root_(std::make_unique<Node>()) {}
Filter::~Filter() = default;
Filter::Filter(Filter&&) noexcept = default;
Filter& Filter::operator=(Filter&&) noexcept = default;

Filter Filter::parse(std::string_view text) {
  Filter f;
  f.root_ = Parser(text).parse();
  return f;
}

bool Filter::matches(const EntryView& entry) const { return eval(*root_, entry); }

TimeBounds Filter::time_bounds() const { return bounds(*root_); }

std::string Filter::debug_string() const {
  std::string out;
  render(*root_, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// JsonEntryView

const json* JsonEntryView::find(const std::vector<std::string>& path) const {
  const json* cur = &entry_;
  for (const auto& seg : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(seg);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::optional<std::int64_t> JsonEntryView::time_field(std::string_view name) const {
  auto it = entry_.find(std::string(name));
  if (it == entry_.end() || !it->is_string()) return std::nullopt;
  return tools::parse_rfc3339_nanos(it->get_ref<const std::string&>());
}

bool JsonEntryView::any_text(const std::function<bool(std::string_view)>& fn) const {
  return any_leaf_text(entry_, fn);
}

}  // namespace falcon::fake::lql

#include "loader/job/yaml_limits.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace ddph {
namespace loader {
namespace {

// Thrown from an event to end the parse at the first breach.
struct Stop {};

class LimitCounter : public YAML::EventHandler {
 public:
  explicit LimitCounter(const YamlLimits& limits) : limits_(limits) {}

  const YamlLimitBreach& breach() const { return breach_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnAnchor(const YAML::Mark&, const std::string& name) override { anchor_name_ = name; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    leaf(mark, anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapEnd() override { close(); }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (++aliases_ > limits_.max_aliases)
      stop(mark, "more than " + std::to_string(limits_.max_aliases) +
                     " aliases, the config reader's limit");
    auto it = anchors_.find(anchor);
    // yaml-cpp refuses an alias to an undefined anchor before calling here.
    const Subtree tree = it != anchors_.end() ? it->second : Subtree{1, 1, true, "", mark};
    if (!tree.closed)
      stop(mark, alias_name(tree) + " refers to the node anchored at line " +
                     std::to_string(tree.mark.line + 1) +
                     ", which contains the alias: a node cannot contain itself");
    check_depth(mark, int(open_.size()) + tree.height);
    count(mark, tree.nodes);
    attach(tree.nodes, tree.height);
  }

 private:
  // What an anchored node expands to, once it is closed.
  struct Subtree {
    uint64_t nodes;
    int height;  // levels, the node itself included
    bool closed;
    std::string name;
    YAML::Mark mark;
  };
  struct Open {
    YAML::anchor_t anchor;
    uint64_t nodes;  // so far, itself included
    int height;
  };

  static std::string alias_name(const Subtree& tree) {
    return tree.name.empty() ? std::string("this alias") : "alias '*" + tree.name + "'";
  }

  [[noreturn]] void stop(const YAML::Mark& mark, const std::string& message) {
    breach_ = YamlLimitBreach{mark, message};
    throw Stop{};
  }

  void check_depth(const YAML::Mark& mark, int depth) {
    if (depth > limits_.max_depth)
      stop(mark, "nests deeper than " + std::to_string(limits_.max_depth) +
                     " levels (aliases expanded), the config reader's limit");
  }

  // Counts nodes that a walk of the built tree will visit here.
  void count(const YAML::Mark& mark, uint64_t nodes) {
    total_ += nodes;
    if (total_ > limits_.max_nodes)
      stop(mark, "the document grows past " + std::to_string(limits_.max_nodes) +
                     " nodes with its aliases expanded, the config reader's limit (an alias "
                     "repeated inside aliases, as in an alias bomb?)");
  }

  // Adds a finished child (a leaf, an alias's subtree, a closed collection)
  // to the collection that holds it.
  void attach(uint64_t nodes, int height) {
    if (open_.empty()) return;
    open_.back().nodes += nodes;
    open_.back().height = std::max(open_.back().height, height + 1);
  }

  void remember(YAML::anchor_t anchor, const YAML::Mark& mark, const Subtree& tree) {
    if (anchor == YAML::NullAnchor) return;
    Subtree named = tree;
    named.name = anchor_name_;
    named.mark = mark;
    anchors_[anchor] = named;
    anchor_name_.clear();
  }

  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    check_depth(mark, int(open_.size()) + 1);
    remember(anchor, mark, Subtree{1, 1, true, "", mark});
    count(mark, 1);
    attach(1, 1);
  }

  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    check_depth(mark, int(open_.size()) + 1);
    remember(anchor, mark, Subtree{1, 1, false, "", mark});
    count(mark, 1);  // its children are counted as they come
    open_.push_back(Open{anchor, 1, 1});
  }

  void close() {
    const Open done = open_.back();
    open_.pop_back();
    if (done.anchor != YAML::NullAnchor) {
      Subtree& tree = anchors_[done.anchor];
      tree.nodes = done.nodes;
      tree.height = done.height;
      tree.closed = true;
    }
    attach(done.nodes, done.height);
  }

  const YamlLimits limits_;
  std::vector<Open> open_;
  std::unordered_map<YAML::anchor_t, Subtree> anchors_;
  std::string anchor_name_;  // from OnAnchor, for the node event that follows
  uint64_t total_ = 0, aliases_ = 0;
  YamlLimitBreach breach_;
};

// Stops at the start of a document, to find where a second one begins
// without reading it.
class DocumentStart : public YAML::EventHandler {
 public:
  YAML::Mark mark;

  void OnDocumentStart(const YAML::Mark& at) override {
    mark = at;
    throw Stop{};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

bool check_yaml_limits(const std::string& text, const YamlLimits& limits, YamlLimitBreach* breach) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  LimitCounter counter(limits);
  try {
    parser.HandleNextDocument(counter);
  } catch (const Stop&) {
    *breach = counter.breach();
    return false;
  }
  DocumentStart second;
  try {
    if (!parser.HandleNextDocument(second)) return true;
  } catch (const Stop&) {
  }
  *breach = YamlLimitBreach{second.mark,
                            "a second YAML document starts here ('---'); a job file holds one "
                            "document, and the config reader would ignore this one: remove it "
                            "or put it in a file of its own"};
  return false;
}

}  // namespace loader
}  // namespace ddph

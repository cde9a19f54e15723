// The post-search half of lattice decoding, compiled into asrdist.decode.lattice._native (with
// search.cpp): asrdist.decode.lattice's Python port of Kaldi's
// DeterminizeLatticePhonePrunedWrapper (and the raw lattice's read, Connect and cost offsets
// before it; the sweep's best paths and the archive's bytes after), transcribed function by
// function from that Python so that the output is the same to the bit: the same states in the
// same numbering, the same arcs in the same order, the same float32 weights and transition-id
// strings. Each function below names the Python function it transcribes; read that one's
// docstring for the why.
//
// float32 stays float32: every weight sum is a float sum, as numpy's float32 scalars compute it
// (the build passes -ffp-contract=off so that no sum and product fuse); costs that the Python
// sums as Python floats are doubles here.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

// ---- LatticeWeight arithmetic (_times, _compare, _plus, _divide, cost, _approx_equal) ----

struct W {
  float g;  // graph cost
  float a;  // acoustic cost
};

const float kInf = std::numeric_limits<float>::infinity();
const W kOne{0.0f, 0.0f};
const W kZero{kInf, kInf};
const float kDelta = 1.0f / 1024;

using Str = std::vector<int32_t>;

bool is_zero(W w) { return w.g == kInf && w.a == kInf; }

W times(W a, W b) { return {a.g + b.g, a.a + b.a}; }

int compare(W a, W b) {
  float fa = a.g + a.a, fb = b.g + b.a;
  if (fa < fb) return 1;
  if (fa > fb) return -1;
  if (a.g < b.g) return 1;
  if (a.g > b.g) return -1;
  return 0;
}

W plus(W a, W b) { return compare(a, b) >= 0 ? a : b; }

W divide(W a, W b) {
  float v1 = a.g - b.g, v2 = a.a - b.a;
  if (std::isinf(v1) || std::isinf(v2)) return kZero;
  return {v1, v2};
}

double cost(W w) { return static_cast<double>(w.g) + static_cast<double>(w.a); }

bool approx_equal(W a, W b) {
  if (a.g == b.g && a.a == b.a) return true;
  float d = (a.g + a.a) - (b.g + b.a);
  return std::fabs(d) <= kDelta;
}

int compare_with_strings(W aw, const Str& astr, W bw, const Str& bstr) {
  int c = compare(aw, bw);
  if (c != 0 || astr == bstr) return c;
  if (astr.size() != bstr.size()) return astr.size() > bstr.size() ? -1 : 1;
  return astr < bstr ? -1 : 1;
}

// ---- lattices ----

struct Arc {
  int32_t il, ol;
  W w;
  int32_t next;
};

struct Lattice {
  std::vector<std::vector<Arc>> arcs;
  std::vector<W> final;
  int32_t start = 0;

  int32_t add_state() {
    arcs.emplace_back();
    final.push_back(kZero);
    return static_cast<int32_t>(arcs.size()) - 1;
  }
};

struct CompactArc {
  int32_t word;
  W w;
  Str str;
  int32_t next;
};

struct CompactLattice {
  std::vector<std::vector<CompactArc>> arcs;
  std::vector<bool> is_final;
  std::vector<W> final_w;
  std::vector<Str> final_str;
  int32_t start = 0;
};

template <class A>
using Arcs = std::vector<std::vector<A>>;

// _connected: states both reachable from start and reaching a final state, in order.
template <class A>
std::vector<int32_t> connected(const Arcs<A>& arcs, const std::vector<bool>& final,
                               int32_t start) {
  size_t n = arcs.size();
  std::vector<bool> acc(n, false);
  acc[start] = true;
  std::vector<int32_t> stack{start};
  while (!stack.empty()) {
    int32_t s = stack.back();
    stack.pop_back();
    for (const A& a : arcs[s]) {
      if (!acc[a.next]) {
        acc[a.next] = true;
        stack.push_back(a.next);
      }
    }
  }
  // predecessors, flat: those of t are preds[begin[t]:begin[t + 1]]
  std::vector<int32_t> begin(n + 1, 0), preds;
  for (const auto& state_arcs : arcs)
    for (const A& a : state_arcs) ++begin[a.next + 1];
  for (size_t t = 0; t < n; ++t) begin[t + 1] += begin[t];
  preds.resize(begin[n]);
  std::vector<int32_t> fill(begin.begin(), begin.end() - 1);
  for (size_t s = 0; s < n; ++s)
    for (const A& a : arcs[s]) preds[fill[a.next]++] = static_cast<int32_t>(s);
  std::vector<bool> coacc(final);
  for (size_t s = 0; s < n; ++s)
    if (final[s]) stack.push_back(static_cast<int32_t>(s));
  while (!stack.empty()) {
    int32_t s = stack.back();
    stack.pop_back();
    for (int32_t i = begin[s]; i < begin[s + 1]; ++i) {
      int32_t p = preds[i];
      if (!coacc[p]) {
        coacc[p] = true;
        stack.push_back(p);
      }
    }
  }
  std::vector<int32_t> keep;
  if (!coacc[start]) return keep;
  for (size_t s = 0; s < n; ++s)
    if (acc[s] && coacc[s]) keep.push_back(static_cast<int32_t>(s));
  return keep;
}

std::vector<int32_t> renumbering(const std::vector<int32_t>& keep, size_t n) {
  std::vector<int32_t> map(n, -1);
  for (size_t i = 0; i < keep.size(); ++i) map[keep[i]] = static_cast<int32_t>(i);
  return map;
}

// connect
Lattice connect(const Lattice& lat) {
  if (lat.arcs.empty()) return lat;
  std::vector<bool> final(lat.final.size());
  for (size_t s = 0; s < final.size(); ++s) final[s] = !is_zero(lat.final[s]);
  std::vector<int32_t> keep = connected(lat.arcs, final, lat.start);
  std::vector<int32_t> map = renumbering(keep, lat.arcs.size());
  Lattice out;
  out.arcs.reserve(keep.size());
  for (int32_t s : keep) {
    std::vector<Arc> arcs;
    arcs.reserve(lat.arcs[s].size());
    for (const Arc& a : lat.arcs[s])
      if (map[a.next] >= 0) arcs.push_back({a.il, a.ol, a.w, map[a.next]});
    out.arcs.push_back(std::move(arcs));
    out.final.push_back(lat.final[s]);
  }
  out.start = map[lat.start] >= 0 ? map[lat.start] : 0;
  return out;
}

// _top_order: Kahn's algorithm over states 0..n-1, the sources pushed from the highest,
// each state's successors pushed in reverse arc order (the Python's order, so ties come out
// the same). successors(s, f) calls f(next) for each arc of s, last arc first.
template <class Successors>
std::vector<int32_t> top_order_by(size_t n, Successors successors) {
  std::vector<int32_t> indeg(n, 0);
  for (size_t s = 0; s < n; ++s)
    successors(static_cast<int32_t>(s), [&](int32_t next) { ++indeg[next]; });
  std::vector<int32_t> order, stack;
  order.reserve(n);
  for (size_t i = n; i-- > 0;)
    if (indeg[i] == 0) stack.push_back(static_cast<int32_t>(i));
  while (!stack.empty()) {
    int32_t s = stack.back();
    stack.pop_back();
    order.push_back(s);
    successors(s, [&](int32_t next) {
      if (--indeg[next] == 0) stack.push_back(next);
    });
  }
  if (order.size() != n)
    throw py::value_error(
        "the lattice has a cycle (empty words or epsilon cycles in the LM?)");
  return order;
}

template <class A>
std::vector<int32_t> top_order(const Arcs<A>& arcs) {
  return top_order_by(arcs.size(), [&](int32_t s, auto&& f) {
    for (auto it = arcs[s].rbegin(); it != arcs[s].rend(); ++it) f(it->next);
  });
}

// top_sort
Lattice top_sort(Lattice lat) {
  std::vector<int32_t> order = top_order(lat.arcs);
  std::vector<int32_t> map(order.size());
  for (size_t i = 0; i < order.size(); ++i) map[order[i]] = static_cast<int32_t>(i);
  Lattice out;
  out.arcs.reserve(order.size());
  for (int32_t s : order) {
    std::vector<Arc> arcs = std::move(lat.arcs[s]);
    for (Arc& a : arcs) a.next = map[a.next];
    out.arcs.push_back(std::move(arcs));
    out.final.push_back(lat.final[s]);
  }
  out.start = map[lat.start];
  return out;
}

// _from_kaldifst: OpenFst's binary VectorFst layout of a kaldifst.Lattice.
Lattice read_fst(const char* data, size_t size) {
  size_t pos = 4;  // magic
  auto need = [&](size_t n) {
    if (pos + n > size) throw py::value_error("the raw lattice's bytes end too early");
  };
  for (int i = 0; i < 2; ++i) {  // fst type, arc type
    need(4);
    int32_t len;
    std::memcpy(&len, data + pos, 4);
    pos += 4 + static_cast<size_t>(len);
  }
  need(40);
  int64_t start, num_states;
  std::memcpy(&start, data + pos + 16, 8);
  std::memcpy(&num_states, data + pos + 24, 8);
  pos += 40;
  Lattice lat;
  lat.start = static_cast<int32_t>(start);
  lat.arcs.resize(num_states);
  lat.final.resize(num_states);
  for (int64_t s = 0; s < num_states; ++s) {
    need(16);
    std::memcpy(&lat.final[s], data + pos, 8);
    int64_t k;
    std::memcpy(&k, data + pos + 8, 8);
    pos += 16;
    need(20 * static_cast<size_t>(k));
    std::vector<Arc>& arcs = lat.arcs[s];
    arcs.resize(k);
    for (int64_t j = 0; j < k; ++j, pos += 20) {
      std::memcpy(&arcs[j].il, data + pos, 4);
      std::memcpy(&arcs[j].ol, data + pos + 4, 4);
      std::memcpy(&arcs[j].w, data + pos + 8, 8);
      std::memcpy(&arcs[j].next, data + pos + 16, 4);
    }
  }
  return lat;
}

// _with_cost_offsets
Lattice with_cost_offsets(Lattice lat) {
  size_t n = lat.arcs.size();
  std::vector<int32_t> frame(n, -1);
  frame[lat.start] = 0;
  std::vector<std::vector<int32_t>> by_frame{{lat.start}};
  for (size_t f = 0; f < by_frame.size(); ++f) {
    for (size_t i = 0; i < by_frame[f].size(); ++i) {
      int32_t s = by_frame[f][i];
      for (const Arc& a : lat.arcs[s]) {
        if (frame[a.next] < 0) {
          frame[a.next] = static_cast<int32_t>(f) + (a.il != 0);
          if (static_cast<size_t>(frame[a.next]) == by_frame.size()) by_frame.emplace_back();
          by_frame[frame[a.next]].push_back(a.next);
        }
      }
    }
  }
  std::vector<float> tot(n, kInf);
  tot[lat.start] = 0.0f;
  for (const std::vector<int32_t>& states : by_frame) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (int32_t s : states) {
        for (const Arc& a : lat.arcs[s]) {
          if (a.il == 0 && tot[s] + a.w.g < tot[a.next]) {
            tot[a.next] = tot[s] + a.w.g;
            changed = true;
          }
        }
      }
    }
    float best = tot[states[0]];
    for (size_t i = 1; i < states.size(); ++i)
      if (tot[states[i]] < best) best = tot[states[i]];
    float offset = -best;
    for (int32_t s : states) {
      for (Arc& a : lat.arcs[s]) {
        if (a.il == 0) continue;
        float ac = offset + a.w.a;
        float cand = (tot[s] + ac) + a.w.g;
        if (cand < tot[a.next]) tot[a.next] = cand;
        a.w.a = ac - offset;
      }
    }
  }
  return lat;
}

// ---- the pruned lattice determinizer (_Determinizer) ----

struct Element {
  int32_t state;
  Str str;
  W w;
};

using Subset = std::vector<Element>;

// normalize_subset: the subset, its total weight, and the common prefix of its strings.
struct Normalized {
  Subset subset;
  W weight;
  Str prefix;
};

Normalized normalize_subset(Subset subset) {
  if (subset.empty()) throw py::value_error("the determinizer met an empty subset");
  W weight = subset[0].w;
  size_t k = subset[0].str.size();
  const Str& first = subset[0].str;
  for (size_t i = 1; i < subset.size(); ++i) {
    weight = plus(weight, subset[i].w);
    const Str& s = subset[i].str;
    size_t m = 0;
    while (m < k && m < s.size() && first[m] == s[m]) ++m;
    k = m;
  }
  Str prefix(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(k));
  for (Element& e : subset) {
    e.str.erase(e.str.begin(), e.str.begin() + static_cast<std::ptrdiff_t>(k));
    e.w = divide(e.w, weight);
  }
  return {std::move(subset), weight, std::move(prefix)};
}

struct Task {
  double priority;
  int32_t ostate;
  int32_t label;
  Subset subset;
};

// _TaskQueue: libstdc++'s binary heap on the priority alone.
class TaskQueue {
 public:
  void push(Task task) {
    heap_.push_back(std::move(task));
    push_up(heap_.size() - 1, 0, std::move(heap_.back()));
  }

  Task pop() {
    Task top = std::move(heap_[0]);
    Task last = std::move(heap_.back());
    heap_.pop_back();
    size_t n = heap_.size();
    if (n) {
      size_t hole = 0, second = 0;
      while (second < (n - 1) / 2) {
        second = 2 * (second + 1);
        if (heap_[second].priority > heap_[second - 1].priority) --second;
        heap_[hole] = std::move(heap_[second]);
        hole = second;
      }
      if (n % 2 == 0 && second == (n - 2) / 2) {
        second = 2 * (second + 1);
        heap_[hole] = std::move(heap_[second - 1]);
        hole = second - 1;
      }
      push_up(hole, 0, std::move(last));
    }
    return top;
  }

  bool empty() const { return heap_.empty(); }

 private:
  void push_up(size_t hole, size_t top, Task value) {
    while (hole > top) {
      size_t parent = (hole - 1) / 2;
      if (!(heap_[parent].priority > value.priority)) break;
      heap_[hole] = std::move(heap_[parent]);
      hole = parent;
    }
    heap_[hole] = std::move(value);
  }

  std::vector<Task> heap_;
};

// The Python's hash tables: (state, string) per element -> [(weights, value)], looked up by
// the first entry of the subset's (state, string)s whose weights are all approximately equal.
// Entries are kept per hash of those (state, string)s, in the order stored.
template <class V>
class SubsetTable {
 public:
  const V* lookup(const Subset& subset) const {
    auto it = map_.find(hash(subset));
    if (it == map_.end()) return nullptr;
    for (const Entry& entry : it->second) {
      if (!same_strings(entry.subset, subset)) continue;
      bool all = true;
      for (size_t i = 0; i < subset.size() && all; ++i)
        all = approx_equal(entry.subset[i].w, subset[i].w);
      if (all) return &entry.value;
    }
    return nullptr;
  }

  void store(const Subset& subset, V value) {
    map_[hash(subset)].push_back({subset, std::move(value)});
  }

 private:
  struct Entry {
    Subset subset;
    V value;
  };

  static bool same_strings(const Subset& a, const Subset& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].state != b[i].state || a[i].str != b[i].str) return false;
    return true;
  }

  static uint64_t hash(const Subset& subset) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](int32_t x) {
      h ^= static_cast<uint32_t>(x);
      h *= 1099511628211ull;
    };
    for (const Element& e : subset) {
      mix(e.state);
      mix(static_cast<int32_t>(e.str.size()));
      for (int32_t x : e.str) mix(x);
    }
    return h;
  }

  std::unordered_map<uint64_t, std::vector<Entry>> map_;
};

struct OutArc {
  int32_t label;
  Str seq;
  int32_t next;  // -1: the final weight
  W w;
};

struct Found {
  int32_t next;
  Str str;
  W w;
};

struct EpsArc {
  int32_t ol;
  W w;
  int32_t next;
};

class Determinizer {
 public:
  Determinizer(Lattice lat, double beam) : lat_(std::move(lat)) {
    size_t n = lat_.arcs.size();
    back_.assign(n, 0.0);
    eps_.resize(n);
    labelled_.resize(n);
    emitting_.assign(n, false);
    slot_.assign(n, -1);
    for (size_t s = n; s-- > 0;) {
      W f = lat_.final[s];
      double c = cost(f);
      bool emitting = !is_zero(f);
      size_t num_eps = 0;
      for (const Arc& a : lat_.arcs[s]) num_eps += a.il == 0;
      eps_[s].reserve(num_eps);
      labelled_[s].reserve(lat_.arcs[s].size() - num_eps);
      for (const Arc& a : lat_.arcs[s]) {
        double wc = cost(a.w);
        if (wc + back_[a.next] < c) c = wc + back_[a.next];
        if (is_zero(a.w)) continue;
        if (a.il) {
          labelled_[s].push_back(a);
          emitting = true;
        } else {
          eps_[s].push_back({a.ol, a.w, a.next});
        }
      }
      back_[s] = c;
      emitting_[s] = emitting;
    }
    cutoff_ = back_[lat_.start] + beam;
  }

  void run() {
    Subset initial{{lat_.start, {}, kOne}};
    new_state(minimal(closure(std::move(initial))), 0.0);
    while (!queue_.empty()) {
      Task task = queue_.pop();
      process_transition(task.ostate, task.label, std::move(task.subset));
    }
  }

  // output_lattice
  Lattice output_lattice(int32_t first_removed) const {
    Lattice out;
    out.arcs.resize(states_.size());
    out.final.assign(states_.size(), kZero);
    for (size_t s = 0; s < out_arcs_.size(); ++s) {
      for (const OutArc& arc : out_arcs_[s]) {
        int32_t ilabel = arc.label >= first_removed ? 0 : arc.label;
        int32_t cur = static_cast<int32_t>(s);
        const Str& seq = arc.seq;
        if (arc.next < 0) {
          for (size_t i = 0; i < seq.size(); ++i) {
            int32_t nw = out.add_state();
            out.arcs[cur].push_back({0, seq[i], i == 0 ? arc.w : kOne, nw});
            cur = nw;
          }
          out.final[cur] = seq.empty() ? arc.w : kOne;
          continue;
        }
        for (size_t i = 0; i + 1 < seq.size(); ++i) {
          int32_t nw = out.add_state();
          out.arcs[cur].push_back({i == 0 ? ilabel : 0, seq[i], i == 0 ? arc.w : kOne, nw});
          cur = nw;
        }
        bool last = seq.size() <= 1;
        out.arcs[cur].push_back(
            {last ? ilabel : 0, seq.empty() ? 0 : seq.back(), last ? arc.w : kOne, arc.next});
      }
    }
    return out;
  }

  // output_compact
  CompactLattice output_compact() const {
    CompactLattice out;
    size_t n = states_.size();
    out.arcs.resize(n);
    out.is_final.assign(n, false);
    out.final_w.assign(n, kZero);
    out.final_str.resize(n);
    for (size_t s = 0; s < n; ++s) {
      for (const OutArc& arc : out_arcs_[s]) {
        if (arc.next < 0) {
          out.is_final[s] = true;
          out.final_w[s] = arc.w;
          out.final_str[s] = arc.seq;
        } else {
          out.arcs[s].push_back({arc.label, arc.w, arc.seq, arc.next});
        }
      }
    }
    return out;
  }

 private:
  struct State {
    Subset subset;
    double forward_cost;
  };

  // _closure
  Subset closure(Subset subset) {
    Subset cur;
    cur.reserve(subset.size());
    std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>> heap;
    for (Element& e : subset) {
      if (!eps_[e.state].empty()) heap.push(e.state);
      if (slot_[e.state] >= 0) {
        cur[slot_[e.state]] = std::move(e);
      } else {
        slot_[e.state] = static_cast<int32_t>(cur.size());
        cur.push_back(std::move(e));
      }
    }
    while (!heap.empty()) {
      int32_t state = heap.top();
      heap.pop();
      const Element& taken = cur[slot_[state]];
      Str string = taken.str;
      W ew = taken.w;
      for (const EpsArc& arc : eps_[state]) {
        W weight{ew.g + arc.w.g, ew.a + arc.w.a};
        Str nstring;
        nstring.reserve(string.size() + 1);
        nstring = string;
        if (arc.ol) nstring.push_back(arc.ol);
        int32_t k = slot_[arc.next];
        if (k < 0) {
          slot_[arc.next] = static_cast<int32_t>(cur.size());
          cur.push_back({arc.next, std::move(nstring), weight});
          if (!eps_[arc.next].empty()) heap.push(arc.next);
        } else if (compare_with_strings(weight, nstring, cur[k].w, cur[k].str) == 1) {
          cur[k] = {arc.next, std::move(nstring), weight};
        }
      }
    }
    for (const Element& e : cur) slot_[e.state] = -1;
    std::sort(cur.begin(), cur.end(),
              [](const Element& a, const Element& b) { return a.state < b.state; });
    return cur;
  }

  // _minimal
  Subset minimal(Subset subset) const {
    Subset out;
    out.reserve(subset.size());
    for (Element& e : subset)
      if (emitting_[e.state]) out.push_back(std::move(e));
    return out;
  }

  // _new_state
  int32_t new_state(Subset subset, double forward_cost) {
    int32_t sid = static_cast<int32_t>(states_.size());
    minimal_hash_.store(subset, sid);
    states_.push_back({std::move(subset), forward_cost});
    out_arcs_.emplace_back();
    process_final(sid);
    process_transitions(sid);
    return sid;
  }

  // _process_final
  void process_final(int32_t sid) {
    const State& st = states_[sid];
    bool have = false;
    W best_w = kZero;
    const Str* best_s = nullptr;
    for (const Element& e : st.subset) {
      W w = times(e.w, lat_.final[e.state]);
      if (!is_zero(w) && (!have || compare_with_strings(w, e.str, best_w, *best_s) == 1)) {
        have = true;
        best_w = w;
        best_s = &e.str;
      }
    }
    if (have && cost(best_w) + st.forward_cost <= cutoff_)
      out_arcs_[sid].push_back({0, *best_s, -1, best_w});
  }

  // _process_transitions
  void process_transitions(int32_t sid) {
    const Subset& subset = states_[sid].subset;
    double forward_cost = states_[sid].forward_cost;
    std::vector<std::pair<int32_t, Element>> elems;
    for (const Element& e : subset) {
      for (const Arc& a : labelled_[e.state]) {
        Str s;
        s.reserve(e.str.size() + 1);
        s = e.str;
        if (a.ol) s.push_back(a.ol);
        elems.push_back({a.il, {a.next, std::move(s), {e.w.g + a.w.g, e.w.a + a.w.a}}});
      }
    }
    std::stable_sort(elems.begin(), elems.end(), [](const auto& x, const auto& y) {
      return x.first < y.first || (x.first == y.first && x.second.state < y.second.state);
    });
    for (size_t i = 0; i < elems.size();) {
      size_t j = i;
      while (j < elems.size() && elems[j].first == elems[i].first) ++j;
      double best = cost(elems[i].second.w) + back_[elems[i].second.state];
      for (size_t k = i + 1; k < j; ++k) {
        double v = cost(elems[k].second.w) + back_[elems[k].second.state];
        if (v < best) best = v;
      }
      double priority = best + forward_cost;
      if (!(priority > cutoff_)) {
        Subset unique;
        for (size_t k = i; k < j; ++k) {  // MakeSubsetUnique: the best element per state
          Element& e = elems[k].second;
          if (!unique.empty() && unique.back().state == e.state) {
            if (compare_with_strings(e.w, e.str, unique.back().w, unique.back().str) == 1)
              unique.back() = std::move(e);
          } else {
            unique.push_back(std::move(e));
          }
        }
        queue_.push({priority, sid, elems[i].first, std::move(unique)});
      }
      i = j;
    }
  }

  // _process_transition
  void process_transition(int32_t ostate, int32_t label, Subset task_subset) {
    double forward_cost = states_[ostate].forward_cost;
    Normalized norm = normalize_subset(std::move(task_subset));
    forward_cost += cost(norm.weight);
    Found found;
    if (const Found* hit = initial_hash_.lookup(norm.subset)) {
      found = *hit;
    } else {
      Normalized min = normalize_subset(minimal(closure(norm.subset)));
      double fc = forward_cost + cost(min.weight);
      const int32_t* nxt = minimal_hash_.lookup(min.subset);
      int32_t next = nxt ? *nxt : new_state(std::move(min.subset), fc);
      found = {next, std::move(min.prefix), min.weight};
      initial_hash_.store(norm.subset, found);
    }
    Str seq = std::move(norm.prefix);
    seq.insert(seq.end(), found.str.begin(), found.str.end());
    out_arcs_[ostate].push_back({label, std::move(seq), found.next, times(norm.weight, found.w)});
  }

  Lattice lat_;
  std::vector<double> back_;
  std::vector<std::vector<EpsArc>> eps_;
  std::vector<std::vector<Arc>> labelled_;
  std::vector<bool> emitting_;
  std::vector<int32_t> slot_;  // closure's scratch: an input state's place in its subset
  double cutoff_;
  std::vector<State> states_;
  std::vector<std::vector<OutArc>> out_arcs_;
  SubsetTable<int32_t> minimal_hash_;
  SubsetTable<Found> initial_hash_;
  TaskQueue queue_;
};

// _insert_phones
int32_t insert_phones(Lattice& lat, const int32_t* phone, const uint8_t* starts_phone,
                      size_t num_tids) {
  int32_t first = 0;
  for (const auto& arcs : lat.arcs)
    for (const Arc& a : arcs) first = std::max(first, a.il);
  first += 1;
  size_t n = lat.arcs.size();
  for (size_t s = 0; s < n; ++s) {
    if (static_cast<int32_t>(s) == lat.start) continue;
    for (size_t i = 0; i < lat.arcs[s].size(); ++i) {
      Arc a = lat.arcs[s][i];
      if (a.ol == 0) continue;
      if (a.ol < 0 || static_cast<size_t>(a.ol) >= num_tids)
        throw py::value_error("transition-id " + std::to_string(a.ol) +
                              " in the lattice is not in the model");
      if (!starts_phone[a.ol]) continue;
      int32_t label = first + phone[a.ol];
      if (a.il == 0) {
        lat.arcs[s][i].il = label;
      } else {
        int32_t extra = lat.add_state();
        lat.arcs[extra].push_back({label, 0, kOne, a.next});
        lat.arcs[s][i].next = extra;
      }
    }
  }
  return first;
}

// connect_compact
CompactLattice connect_compact(const CompactLattice& clat) {
  if (clat.arcs.empty()) return clat;
  size_t n = clat.arcs.size();
  std::vector<bool> final(n);
  for (size_t s = 0; s < n; ++s) final[s] = clat.is_final[s] && !is_zero(clat.final_w[s]);
  std::vector<int32_t> keep = connected(clat.arcs, final, clat.start);
  std::vector<int32_t> map = renumbering(keep, n);
  CompactLattice out;
  for (int32_t s : keep) {
    std::vector<CompactArc> arcs;
    for (const CompactArc& a : clat.arcs[s])
      if (map[a.next] >= 0) arcs.push_back({a.word, a.w, a.str, map[a.next]});
    out.arcs.push_back(std::move(arcs));
    out.is_final.push_back(clat.is_final[s]);
    out.final_w.push_back(clat.final_w[s]);
    out.final_str.push_back(clat.final_str[s]);
  }
  out.start = map[clat.start] >= 0 ? map[clat.start] : 0;
  return out;
}

// determinize_lattice_phone_pruned
CompactLattice determinize_phone_pruned(const Lattice& raw, const int32_t* phone,
                                        const uint8_t* starts_phone, size_t num_tids,
                                        double beam) {
  if (raw.arcs.empty()) return CompactLattice();
  std::vector<int32_t> order = top_order(raw.arcs);
  std::vector<int32_t> map(order.size());
  for (size_t i = 0; i < order.size(); ++i) map[order[i]] = static_cast<int32_t>(i);
  Lattice lat;
  for (int32_t s : order) {  // Invert, TopSort and ArcSort by ilabel, in one copy
    std::vector<Arc> arcs;
    arcs.reserve(raw.arcs[s].size());
    for (const Arc& a : raw.arcs[s]) arcs.push_back({a.ol, a.il, a.w, map[a.next]});
    std::stable_sort(arcs.begin(), arcs.end(),
                     [](const Arc& x, const Arc& y) { return x.il < y.il; });
    lat.arcs.push_back(std::move(arcs));
    lat.final.push_back(raw.final[s]);
  }
  lat.start = map[raw.start];
  int32_t first_phone = insert_phones(lat, phone, starts_phone, num_tids);
  Determinizer phones_and_words(top_sort(std::move(lat)), beam);
  phones_and_words.run();
  Determinizer words(top_sort(phones_and_words.output_lattice(first_phone)), beam);
  words.run();
  return connect_compact(words.output_compact());
}

// scale_lattice(clat, 1.0, ac_scale)
W scale_acoustic(W w, double ac_scale) {
  if (std::isinf(w.g)) return kZero;
  double g = w.g, a = w.a;
  return {static_cast<float>(1.0 * g + 0.0 * a), static_cast<float>(0.0 * g + ac_scale * a)};
}

template <class T>
py::array_t<T> to_array(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(T));
  return out;
}

py::tuple compact_lattice(const py::bytes& fst, const py::array_t<int32_t, py::array::c_style>& phone,
                          const py::array_t<uint8_t, py::array::c_style>& starts_phone,
                          double lattice_beam, double acoustic_scale, bool cost_offsets) {
  if (phone.ndim() != 1 || starts_phone.ndim() != 1 || phone.shape(0) != starts_phone.shape(0))
    throw py::value_error("phone and starts_phone must be vectors of one length");
  char* data;
  Py_ssize_t size;
  if (PyBytes_AsStringAndSize(fst.ptr(), &data, &size) != 0) throw py::error_already_set();
  Lattice raw = read_fst(data, static_cast<size_t>(size));
  if (raw.arcs.empty()) throw py::value_error("the raw lattice has no states");
  Lattice conn = connect(raw);
  if (conn.arcs.empty()) throw py::value_error("the raw lattice has no successful path");
  CompactLattice clat =
      determinize_phone_pruned(cost_offsets ? with_cost_offsets(std::move(conn)) : std::move(conn),
                               phone.data(),
                               starts_phone.data(), static_cast<size_t>(phone.shape(0)),
                               lattice_beam);
  // flat arrays: per state its number of arcs; per arc word, weight pair, next state; per
  // arc then per state (final) the string, as offsets into one array of transition-ids
  size_t n = clat.arcs.size();
  std::vector<int64_t> counts, offsets{0};
  std::vector<int32_t> words, nexts, labels;
  std::vector<float> weights, final_weights;
  std::vector<uint8_t> finals;
  for (size_t s = 0; s < n; ++s) {
    counts.push_back(static_cast<int64_t>(clat.arcs[s].size()));
    for (const CompactArc& a : clat.arcs[s]) {
      words.push_back(a.word);
      W w = scale_acoustic(a.w, acoustic_scale);
      weights.push_back(w.g);
      weights.push_back(w.a);
      nexts.push_back(a.next);
      labels.insert(labels.end(), a.str.begin(), a.str.end());
      offsets.push_back(static_cast<int64_t>(labels.size()));
    }
  }
  for (size_t s = 0; s < n; ++s) {
    finals.push_back(clat.is_final[s] ? 1 : 0);
    W w = clat.is_final[s] ? scale_acoustic(clat.final_w[s], acoustic_scale) : kZero;
    final_weights.push_back(w.g);
    final_weights.push_back(w.a);
    labels.insert(labels.end(), clat.final_str[s].begin(), clat.final_str[s].end());
    offsets.push_back(static_cast<int64_t>(labels.size()));
  }
  return py::make_tuple(clat.start, to_array(counts), to_array(words), to_array(weights),
                        to_array(nexts), to_array(finals), to_array(final_weights),
                        to_array(offsets), to_array(labels));
}


// ---- the sweep: best_path at many (lmwt, wip) points (lattice.best_path, _shortest_path) ----

template <class T>
using Vec = py::array_t<T, py::array::c_style | py::array::forcecast>;

// _top_order on the flat arcs (state s's arcs are begin[s]..begin[s+1])
std::vector<int32_t> flat_top_order(const std::vector<int64_t>& begin, const int32_t* nexts) {
  return top_order_by(begin.size() - 1, [&](int32_t s, auto&& f) {
    for (int64_t i = begin[s + 1]; i-- > begin[s];) f(nexts[i]);
  });
}

// scale_lattice's sc(w) with (lm_scale, ac_scale) = (1, ac_scale), ZERO kept
W scale_weight(float g, float a, double ac_scale) {
  if (std::isinf(g)) return kZero;
  double dg = g, da = a;
  return {static_cast<float>(1.0 * dg + 0.0 * da), static_cast<float>(0.0 * dg + ac_scale * da)};
}

// A compact lattice in compact_lattice's flat arrays (see best_paths' arguments), their
// lengths checked against each other: what best_paths and compact_lattice_bytes read
struct Flat {
  size_t n, m;  // states, arcs
  const int64_t* cnt;
  const int32_t* word;
  const float* wt;
  const int32_t* nxt;
  const uint8_t* fin;
  const float* fwt;
  const int64_t* off;
  const int32_t* lab;
  std::vector<int64_t> begin;  // each state's first arc, and the arcs' end

  Flat(const Vec<int64_t>& counts, const Vec<int32_t>& words, const Vec<float>& weights,
       const Vec<int32_t>& nexts, const Vec<uint8_t>& finals, const Vec<float>& final_weights,
       const Vec<int64_t>& offsets, const Vec<int32_t>& labels)
      : n(static_cast<size_t>(counts.size())), m(static_cast<size_t>(words.size())),
        cnt(counts.data()), word(words.data()), wt(weights.data()), nxt(nexts.data()),
        fin(finals.data()), fwt(final_weights.data()), off(offsets.data()),
        lab(labels.data()), begin(n + 1, 0) {
    if (static_cast<size_t>(weights.size()) != 2 * m || static_cast<size_t>(nexts.size()) != m ||
        static_cast<size_t>(finals.size()) != n ||
        static_cast<size_t>(final_weights.size()) != 2 * n ||
        static_cast<size_t>(offsets.size()) != m + n + 1)
      throw py::value_error("the compact lattice's flat arrays disagree in their lengths");
    for (size_t s = 0; s < n; ++s) begin[s + 1] = begin[s] + cnt[s];
    if (static_cast<size_t>(begin[n]) != m)
      throw py::value_error("the compact lattice's arc counts do not add up to its arcs");
    for (size_t i = 0; i <= m + n; ++i)
      if (off[i] < 0 || off[i] > labels.size() || (i && off[i] < off[i - 1]))
        throw py::value_error("the string offsets pass the labels");
  }
};

py::list best_paths(int64_t start, const Vec<int64_t>& counts, const Vec<int32_t>& words,
                    const Vec<float>& weights, const Vec<int32_t>& nexts,
                    const Vec<uint8_t>& finals, const Vec<float>& final_weights,
                    const Vec<int64_t>& offsets, const Vec<int32_t>& labels,
                    const std::vector<std::pair<double, double>>& points) {
  const Flat f(counts, words, weights, nexts, finals, final_weights, offsets, labels);
  const size_t n = f.n, m = f.m;
  const int64_t* cnt = f.cnt;
  const int32_t* word = f.word;
  const float* wt = f.wt;
  const int32_t* nxt = f.nxt;
  const uint8_t* fin = f.fin;
  const float* fwt = f.fwt;
  const int64_t* off = f.off;
  const int32_t* lab = f.lab;
  const std::vector<int64_t>& begin = f.begin;
  for (size_t i = 0; i < m; ++i)
    if (nxt[i] < 0 || static_cast<size_t>(nxt[i]) >= n)
      throw py::value_error("a compact lattice arc leads to no state");
  if (n && (start < 0 || static_cast<size_t>(start) >= n))
    throw py::value_error("the compact lattice's start is no state");
  std::vector<int32_t> order;
  bool sorted = start == 0;
  for (size_t s = 0; s < n && sorted; ++s)
    for (int64_t i = begin[s]; i < begin[s + 1]; ++i)
      if (static_cast<size_t>(nxt[i]) <= s) sorted = false;
  if (n) {
    if (sorted) {
      order.resize(n);
      for (size_t s = 0; s < n; ++s) order[s] = static_cast<int32_t>(s);
    } else {
      order = flat_top_order(begin, nxt);
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(n + 1);
  std::vector<int32_t> back_state(n + 1);
  std::vector<int64_t> back_arc(n + 1);  // arc index, or m + s for state s's final string
  py::list out;
  for (const auto& [lmwt, wip] : points) {
    std::vector<int32_t> path_words, alignment;
    if (n) {
      double ac_scale = 1.0 / lmwt;
      float pen = static_cast<float>(wip);
      std::fill(best.begin(), best.end(), inf);
      std::fill(back_state.begin(), back_state.end(), -1);
      best[start] = 0.0;
      for (int32_t s : order) {
        for (int64_t i = begin[s]; i < begin[s + 1]; ++i) {
          W w = scale_weight(wt[2 * i], wt[2 * i + 1], ac_scale);
          if (word[i] != 0) w.g = w.g + pen;
          double c = best[s] + cost(w);
          if (c < best[nxt[i]]) {
            best[nxt[i]] = c;
            back_state[nxt[i]] = s;
            back_arc[nxt[i]] = i;
          }
        }
        if (fin[s]) {
          double c = best[s] + cost(scale_weight(fwt[2 * s], fwt[2 * s + 1], ac_scale));
          if (c < best[n]) {
            best[n] = c;
            back_state[n] = s;
            back_arc[n] = static_cast<int64_t>(m) + s;
          }
        }
      }
      std::vector<int64_t> strings;
      for (size_t s = n; back_state[s] >= 0; s = static_cast<size_t>(back_state[s])) {
        int64_t a = back_arc[s];
        strings.push_back(a);
        if (a < static_cast<int64_t>(m) && word[a]) path_words.push_back(word[a]);
      }
      std::reverse(path_words.begin(), path_words.end());
      for (auto it = strings.rbegin(); it != strings.rend(); ++it)
        alignment.insert(alignment.end(), lab + off[*it], lab + off[*it + 1]);
    }
    out.append(py::make_tuple(py::cast(path_words), py::cast(alignment)));
  }
  return out;
}

// asrdist.decode.lattice_io.compact_lattice_binary's bytes after the key: OpenFst's VectorFst
// layout of a compact lattice (arc type compactlattice44), from compact_lattice's flat arrays,
// so that a decoded lattice reaches lat.N.gz without being built as Python tuples
py::bytes compact_lattice_bytes(int64_t start, const Vec<int64_t>& counts,
                                const Vec<int32_t>& words, const Vec<float>& weights,
                                const Vec<int32_t>& nexts, const Vec<uint8_t>& finals,
                                const Vec<float>& final_weights, const Vec<int64_t>& offsets,
                                const Vec<int32_t>& labels) {
  const Flat f(counts, words, weights, nexts, finals, final_weights, offsets, labels);
  const size_t n = f.n, m = f.m;
  const int64_t* off = f.off;
  auto is_one = [&](float g, float a, size_t string) {
    return g == 0.0f && a == 0.0f && off[string] == off[string + 1];
  };
  bool weighted = false;
  for (size_t i = 0; i < m && !weighted; ++i)
    weighted = !is_one(f.wt[2 * i], f.wt[2 * i + 1], i);
  for (size_t s = 0; s < n && !weighted; ++s)
    weighted = f.fin[s] && !is_one(f.fwt[2 * s], f.fwt[2 * s + 1], m + s);
  // kExpanded | kMutable | kAcceptor | kNoEpsilons | kNoIEpsilons | kNoOEpsilons, and
  // kWeighted or kUnweighted (lattice_io's _PROPERTIES)
  uint64_t properties = 0x3ULL | 0x10000ULL | 0x800000ULL | 0x2000000ULL | 0x8000000ULL |
                        (weighted ? 0x100000000ULL : 0x200000000ULL);
  std::string out;
  out.reserve(64 + 16 * n + 24 * m + 4 * static_cast<size_t>(off[m + n]));
  auto put = [&out](const void* p, size_t k) { out.append(static_cast<const char*>(p), k); };
  auto put_i32 = [&put](int32_t v) { put(&v, 4); };
  auto put_i64 = [&put](int64_t v) { put(&v, 8); };
  auto put_str = [&](const std::string& text) {
    put_i32(static_cast<int32_t>(text.size()));
    out += text;
  };
  auto put_weight = [&](float g, float a, const int32_t* string, int64_t length) {
    put(&g, 4);
    put(&a, 4);
    put_i32(static_cast<int32_t>(length));
    if (length) put(string, 4 * static_cast<size_t>(length));
  };
  put_i32(2125659606);  // OpenFst's FST magic
  put_str("vector");
  put_str("compactlattice44");
  put_i32(2);  // version
  put_i32(0);  // flags
  put(&properties, 8);
  put_i64(n ? start : -1);
  put_i64(static_cast<int64_t>(n));
  put_i64(0);  // arcs: OpenFst writes 0 to a stream it cannot seek back in
  const float inf = std::numeric_limits<float>::infinity();
  size_t arc = 0;
  for (size_t s = 0; s < n; ++s) {
    if (f.fin[s])
      put_weight(f.fwt[2 * s], f.fwt[2 * s + 1], f.lab + off[m + s],
                 off[m + s + 1] - off[m + s]);
    else
      put_weight(inf, inf, nullptr, 0);
    put_i64(f.cnt[s]);
    for (int64_t k = 0; k < f.cnt[s]; ++k, ++arc) {
      put_i32(f.word[arc]);
      put_i32(f.word[arc]);
      put_weight(f.wt[2 * arc], f.wt[2 * arc + 1], f.lab + off[arc], off[arc + 1] - off[arc]);
      put_i32(f.nxt[arc]);
    }
  }
  return py::bytes(out);
}
}  // namespace

void register_search(py::module_& m);  // search.cpp

PYBIND11_MODULE(_native, m) {
  m.doc() = "asrdist.decode.lattice's raw lattice to compact lattice pipeline, compiled";
  m.def("compact_lattice", &compact_lattice, py::arg("fst"), py::arg("phone"),
        py::arg("starts_phone"), py::arg("lattice_beam"), py::arg("acoustic_scale"),
        py::arg("cost_offsets") = true,
        "The bytes of a raw kaldifst.Lattice (OpenFst's binary layout) to the determinized "
        "compact lattice of LatticeDecoder.decode, as flat arrays: start, arcs per state, "
        "words, weights (pairs), next states, final flags, final weights, string offsets "
        "(arcs', then states' finals), transition-ids.");
  m.def("best_paths", &best_paths, py::arg("start"), py::arg("counts"), py::arg("words"),
        py::arg("weights"), py::arg("nexts"), py::arg("finals"), py::arg("final_weights"),
        py::arg("offsets"), py::arg("labels"), py::arg("points"),
        "lattice.best_path at each (lmwt, wip) of points, on a compact lattice in "
        "compact_lattice's flat arrays: a list of (words, transition-ids) pairs.");
  m.def("compact_lattice_bytes", &compact_lattice_bytes, py::arg("start"), py::arg("counts"),
        py::arg("words"), py::arg("weights"), py::arg("nexts"), py::arg("finals"),
        py::arg("final_weights"), py::arg("offsets"), py::arg("labels"),
        "A compact lattice in compact_lattice's flat arrays as OpenFst's binary VectorFst "
        "(compactlattice44): lattice_io.compact_lattice_binary's bytes after the key.");
  register_search(m);
}

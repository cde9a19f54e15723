// The lattice search of asrdist.decode.lattice._native: a token-passing search over a graph
// in OpenFst's const layout, written from the documented algorithm of Kaldi's
// LatticeFasterDecoder (not from its sources), so that latgen-faster-mapped's options mean
// here what they mean there:
//
// - per frame, the tokens of the previous frame within the cutoff (--beam, narrowed to the
//   max-active-th best cost and widened to the min-active-th: the adaptive beam) follow their
//   emitting arcs with the cost -loglike(transition-id) (the scores come scaled by acwt); the
//   cutoff of the new frame comes from the best token's arcs and tightens as arcs are taken;
//   then the epsilon closure within the frame;
// - acoustic costs are kept relative to a per-frame offset (minus the best token's cost),
//   taken off again when the raw lattice is written, so that they round as Kaldi's do;
// - every forward link is kept; every 25 frames the links and tokens more than the lattice
//   beam (times 0.1, the prune scale) off every path to the newest frame are pruned, and at
//   the end with the final costs (final states' costs when a final state was reached, else
//   every last-frame token counted final) and the whole lattice beam;
// - the active tokens live in a hash list that iterates as Kaldi's HashList does (buckets in
//   the order they were first filled, a bucket's entries in the order they came), since the
//   order of the tokens decides ties of the best token and the numbering of the lattice.
//
// The output is the raw state-level lattice in OpenFst's binary VectorFst layout of a
// kaldifst.Lattice: what compact_lattice takes.

#include <fcntl.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

// const-fst.h's records: a state (final cost, first arc, #arcs, #input-eps, #output-eps) and
// an arc of the standard (tropical) type
struct GraphState {
  float final;
  uint32_t pos;
  uint32_t narcs;
  uint32_t nieps;
  uint32_t noeps;
};
struct GraphArc {
  int32_t il;
  int32_t ol;
  float w;
  int32_t next;
};
static_assert(sizeof(GraphState) == 20 && sizeof(GraphArc) == 16, "OpenFst's const layout");

// The decoding graph: a const file's arrays read in place through a read-only shared map
// (the job's graph costs the file's pages, clean and shared with other jobs), or a vector
// file's arcs converted once into the same arrays.
class Graph {
 public:
  Graph(const std::string& path, int64_t start, int64_t num_states, int64_t num_arcs,
        int64_t states_at, int64_t arcs_at)
      : path_(path), start_(start), num_states_(num_states), num_arcs_(num_arcs) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw py::value_error(path + ": cannot open the graph");
    struct stat st;
    if (::fstat(fd, &st) != 0 ||
        static_cast<int64_t>(st.st_size) < arcs_at + num_arcs * 16 ||
        states_at + num_states * 20 > arcs_at) {
      ::close(fd);
      throw py::value_error(path + ": truncated FST");
    }
    map_size_ = static_cast<size_t>(st.st_size);
    void* map = ::mmap(nullptr, map_size_, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) throw py::value_error(path + ": cannot map the graph");
    map_ = map;
    states_ = reinterpret_cast<const GraphState*>(static_cast<const char*>(map) + states_at);
    arcs_ = reinterpret_cast<const GraphArc*>(static_cast<const char*>(map) + arcs_at);
    check();
  }

  Graph(const std::string& path, int64_t start, std::vector<GraphState> states,
        std::vector<GraphArc> arcs)
      : path_(path), start_(start), num_states_(static_cast<int64_t>(states.size())),
        num_arcs_(static_cast<int64_t>(arcs.size())), own_states_(std::move(states)),
        own_arcs_(std::move(arcs)) {
    states_ = own_states_.data();
    arcs_ = own_arcs_.data();
    check();
  }

  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    if (map_ != nullptr) ::munmap(map_, map_size_);
  }

  const GraphState& state(int32_t s) const { return states_[s]; }
  const GraphArc* arcs(int32_t s) const { return arcs_ + states_[s].pos; }
  int32_t start() const { return static_cast<int32_t>(start_); }
  int64_t num_states() const { return num_states_; }
  int64_t num_arcs() const { return num_arcs_; }
  const std::string& path() const { return path_; }

  // a next state outside the graph: the file is damaged
  [[noreturn]] void bad_arc(int32_t s) const {
    throw py::value_error(path_ + ": state " + std::to_string(s) +
                          " has an arc to a state outside the graph");
  }

 private:
  void check() const {
    if (num_states_ <= 0 || start_ < 0 || start_ >= num_states_)
      throw py::value_error(path_ + ": the graph has no start state");
    if (num_states_ > INT32_MAX || num_arcs_ > UINT32_MAX)
      throw py::value_error(path_ + ": too many states or arcs for a const FST");
    for (int64_t s = 0; s < num_states_; ++s) {
      const GraphState& st = states_[s];
      if (static_cast<int64_t>(st.pos) + st.narcs > num_arcs_ || st.nieps > st.narcs)
        throw py::value_error(path_ + ": state " + std::to_string(s) +
                              "'s arcs lie outside the arc array");
    }
  }

  std::string path_;
  int64_t start_, num_states_, num_arcs_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const GraphState* states_ = nullptr;
  const GraphArc* arcs_ = nullptr;
  std::vector<GraphState> own_states_;
  std::vector<GraphArc> own_arcs_;
};

std::shared_ptr<Graph> mapped_graph(const std::string& path, int64_t start, int64_t num_states,
                                    int64_t num_arcs, int64_t states_at, int64_t arcs_at) {
  return std::make_shared<Graph>(path, start, num_states, num_arcs, states_at, arcs_at);
}

// A vector file's states and arcs (asrdist.decode.graph.fst_chunks' arrays, concatenated).
std::shared_ptr<Graph> flat_graph(const std::string& path, int64_t start,
                                  const py::array_t<float, py::array::c_style>& final,
                                  const py::array_t<int64_t, py::array::c_style>& narcs,
                                  const py::array_t<int32_t, py::array::c_style>& arcs) {
  int64_t n = final.shape(0);
  if (narcs.shape(0) != n || arcs.ndim() != 2 || arcs.shape(1) != 4)
    throw py::value_error(path + ": bad graph arrays");
  std::vector<GraphState> states(static_cast<size_t>(n));
  std::vector<GraphArc> flat(static_cast<size_t>(arcs.shape(0)));
  if (!flat.empty()) std::memcpy(flat.data(), arcs.data(), flat.size() * sizeof(GraphArc));
  int64_t pos = 0;
  for (int64_t s = 0; s < n; ++s) {
    int64_t k = narcs.data()[s];
    if (k < 0 || pos + k > static_cast<int64_t>(flat.size()) || pos > UINT32_MAX)
      throw py::value_error(path + ": bad graph arrays");
    uint32_t eps = 0;
    for (int64_t j = pos; j < pos + k; ++j) eps += flat[j].il == 0;
    states[s] = {final.data()[s], static_cast<uint32_t>(pos), static_cast<uint32_t>(k), eps, 0};
    pos += k;
  }
  return std::make_shared<Graph>(path, start, std::move(states), std::move(flat));
}

// ---- the search ----

struct Token {
  float tot_cost;
  float extra_cost;
  int32_t links;  // first forward link, -1 for none
  int32_t next;   // next token of the frame's list
};

struct Link {
  int32_t next_tok;
  int32_t il;
  int32_t ol;
  float graph_cost;
  float acoustic_cost;  // relative to the frame's cost offset
  int32_t next;
};

// A pool of records with a free list: tokens and links are made and dropped by the million.
template <class T>
struct Pool {
  std::vector<T> items;
  std::vector<int32_t> free;
  int32_t make(const T& value) {
    if (!free.empty()) {
      int32_t i = free.back();
      free.pop_back();
      items[i] = value;
      return i;
    }
    items.push_back(value);
    return static_cast<int32_t>(items.size()) - 1;
  }
  void drop(int32_t i) { free.push_back(i); }
  void clear() {
    items.clear();
    free.clear();
  }
  T& operator[](int32_t i) { return items[i]; }
};

// The active tokens of the newest frame, by graph state: a hash list that iterates as Kaldi's
// HashList (util/hash-list.h's documented behaviour): one list, each bucket's entries
// contiguous in it, buckets in the order they were first filled, a bucket's entries in the
// order they were inserted.
class HashList {
 public:
  struct Elem {
    int32_t key;
    int32_t tok;
    int32_t tail;
  };

  void set_size(size_t size) {
    hash_size_ = size;
    if (size > buckets_.size()) buckets_.resize(size, Bucket{-1, -1});
  }
  size_t size() const { return hash_size_; }
  int32_t head() const { return head_; }
  Elem& elem(int32_t e) { return elems_[e]; }

  int32_t find(int32_t key) {
    const Bucket& b = buckets_[static_cast<size_t>(key) % hash_size_];
    if (b.last < 0) return -1;
    int32_t e = b.prev < 0 ? head_ : elems_[buckets_[b.prev].last].tail;
    int32_t end = elems_[b.last].tail;
    for (; e != end; e = elems_[e].tail)
      if (elems_[e].key == key) return e;
    return -1;
  }

  int32_t insert(int32_t key, int32_t tok) {
    size_t index = static_cast<size_t>(key) % hash_size_;
    Bucket& b = buckets_[index];
    int32_t e = elems_.make({key, tok, -1});
    if (b.last < 0) {  // a bucket not yet in the list: its entries go at the end
      if (tail_bucket_ < 0) head_ = e;
      else elems_[buckets_[tail_bucket_].last].tail = e;
      b.last = e;
      b.prev = tail_bucket_;
      tail_bucket_ = static_cast<int64_t>(index);
    } else {  // after the bucket's last entry
      elems_[e].tail = elems_[b.last].tail;
      elems_[b.last].tail = e;
      b.last = e;
    }
    return e;
  }

  // Empties the table; the entries stay readable (through tail) until deleted.
  int32_t clear() {
    for (int64_t b = tail_bucket_; b >= 0; b = buckets_[b].prev) buckets_[b].last = -1;
    tail_bucket_ = -1;
    int32_t h = head_;
    head_ = -1;
    return h;
  }
  void drop(int32_t e) { elems_.drop(e); }
  void drop_all(int32_t e) {
    while (e >= 0) {
      int32_t t = elems_[e].tail;
      elems_.drop(e);
      e = t;
    }
  }

 private:
  struct Bucket {
    int32_t last;
    int64_t prev;
  };
  std::vector<Bucket> buckets_;
  Pool<Elem> elems_;
  size_t hash_size_ = 0;
  int32_t head_ = -1;
  int64_t tail_bucket_ = -1;
};

struct SearchOptions {
  float beam;
  int32_t max_active;
  int32_t min_active;
  float lattice_beam;
  int32_t prune_interval = 25;
  float beam_delta = 0.5f;
  float hash_ratio = 2.0f;
  float prune_scale = 0.1f;
};

struct FrameToks {
  int32_t toks = -1;
  bool must_prune_forward_links = true;
  bool must_prune_tokens = true;
};

bool approx_equal(float a, float b, float tol) {
  if (a == b) return true;
  float diff = std::fabs(a - b);
  if (std::isinf(diff) || std::isnan(diff)) return false;
  return diff <= tol * (std::fabs(a) + std::fabs(b));
}

class Search {
 public:
  Search(std::shared_ptr<Graph> graph, float beam, int32_t max_active, int32_t min_active,
         float lattice_beam)
      : graph_(std::move(graph)), opts_{beam, max_active, min_active, lattice_beam} {
    if (!(beam > 0) || !(lattice_beam > 0) || max_active <= 1 || min_active < 0 ||
        min_active > max_active)
      throw py::value_error("bad search options (beam, lattice beam > 0; "
                            "0 <= min-active <= max-active, max-active > 1)");
    toks_.set_size(1000);
  }

  // The raw lattice of a frames x transition-ids matrix of scaled log-likelihoods (column
  // t - 1 for transition-id t), and whether a final state was reached.
  py::tuple decode(const py::array_t<float, py::array::c_style>& loglikes) {
    if (loglikes.ndim() != 2 || loglikes.shape(0) == 0)
      throw py::value_error("cannot decode an empty score matrix");
    loglikes_ = loglikes.data();
    num_tids_ = static_cast<int32_t>(loglikes.shape(1));
    int32_t frames = static_cast<int32_t>(loglikes.shape(0));
    {
      py::gil_scoped_release release;
      init();
      while (num_frames_decoded() < frames) {
        if (num_frames_decoded() % opts_.prune_interval == 0)
          prune_active_tokens(opts_.lattice_beam * opts_.prune_scale);
        float cutoff = process_emitting();
        process_nonemitting(cutoff);
      }
      finalize();
    }
    std::string raw = raw_lattice();
    bool reached_final = final_relative_cost_ != kInf;
    release();
    return py::make_tuple(py::bytes(raw), reached_final);
  }

 private:
  int32_t num_frames_decoded() const { return static_cast<int32_t>(active_.size()) - 1; }

  float loglike(int32_t frame, int32_t tid) const {
    if (tid < 1 || tid > num_tids_)
      throw py::value_error(graph_->path() + ": transition-id " + std::to_string(tid) +
                            " is not in the model");
    return loglikes_[static_cast<int64_t>(frame) * num_tids_ + (tid - 1)];
  }

  int32_t next_state(int32_t s, const GraphArc& a) const {
    if (a.next < 0 || a.next >= graph_->num_states()) graph_->bad_arc(s);
    return a.next;
  }

  void release() {
    toks_.drop_all(toks_.clear());
    active_.clear();
    tokens_.clear();
    links_.clear();
    cost_offsets_.clear();
    final_costs_.clear();
  }

  void init() {
    release();
    final_relative_cost_ = kInf;
    final_best_cost_ = kInf;
    active_.resize(1);
    int32_t tok = tokens_.make({0.0f, 0.0f, -1, -1});
    active_[0].toks = tok;
    toks_.insert(graph_->start(), tok);
    process_nonemitting(opts_.beam);
  }

  // The new frame's token for a state, made or improved; ``changed``: whether either.
  int32_t find_or_add(int32_t state, int32_t frame_plus_one, float tot_cost, bool* changed) {
    int32_t e = toks_.find(state);
    if (e < 0) {
      int32_t& head = active_[frame_plus_one].toks;
      int32_t tok = tokens_.make({tot_cost, 0.0f, -1, head});
      head = tok;
      if (changed) *changed = true;
      return toks_.insert(state, tok);
    }
    Token& t = tokens_[toks_.elem(e).tok];
    if (t.tot_cost > tot_cost) {
      t.tot_cost = tot_cost;
      if (changed) *changed = true;
    } else if (changed) {
      *changed = false;
    }
    return e;
  }

  void add_link(int32_t tok, int32_t next_tok, int32_t il, int32_t ol, float graph_cost,
                float ac_cost) {
    int32_t l = links_.make({next_tok, il, ol, graph_cost, ac_cost, tokens_[tok].links});
    tokens_[tok].links = l;
  }

  void delete_links(int32_t tok) {
    for (int32_t l = tokens_[tok].links; l >= 0;) {
      int32_t n = links_[l].next;
      links_.drop(l);
      l = n;
    }
    tokens_[tok].links = -1;
  }

  // The cutoff of the tokens in the list from ``head``: the beam around the best, narrowed to
  // the max-active-th best cost or widened to the min-active-th; the beam that gives it
  // (plus beam_delta where active counts decided it) and the best entry.
  float cutoff(int32_t head, size_t* count, float* adaptive_beam, int32_t* best_elem) {
    float best = kInf;
    costs_.clear();
    *best_elem = -1;
    for (int32_t e = head; e >= 0; e = toks_.elem(e).tail) {
      float w = tokens_[toks_.elem(e).tok].tot_cost;
      costs_.push_back(w);
      if (w < best) {
        best = w;
        *best_elem = e;
      }
    }
    *count = costs_.size();
    float beam_cutoff = best + opts_.beam, min_active_cutoff = kInf, max_active_cutoff = kInf;
    size_t max_active = static_cast<size_t>(opts_.max_active);
    size_t min_active = static_cast<size_t>(opts_.min_active);
    if (costs_.size() > max_active) {
      std::nth_element(costs_.begin(), costs_.begin() + max_active, costs_.end());
      max_active_cutoff = costs_[max_active];
    }
    if (max_active_cutoff < beam_cutoff) {
      *adaptive_beam = max_active_cutoff - best + opts_.beam_delta;
      return max_active_cutoff;
    }
    if (costs_.size() > min_active) {
      if (min_active == 0) {
        min_active_cutoff = best;
      } else {
        std::nth_element(costs_.begin(), costs_.begin() + min_active,
                         costs_.size() > max_active ? costs_.begin() + max_active
                                                    : costs_.end());
        min_active_cutoff = costs_[min_active];
      }
    }
    if (min_active_cutoff > beam_cutoff) {
      *adaptive_beam = min_active_cutoff - best + opts_.beam_delta;
      return min_active_cutoff;
    }
    *adaptive_beam = opts_.beam;
    return beam_cutoff;
  }

  float process_emitting() {
    int32_t frame = static_cast<int32_t>(active_.size()) - 1;
    active_.emplace_back();
    int32_t list = toks_.clear();
    size_t count;
    float adaptive_beam;
    int32_t best_elem;
    float cur_cutoff = cutoff(list, &count, &adaptive_beam, &best_elem);
    size_t want = static_cast<size_t>(static_cast<float>(count) * opts_.hash_ratio);
    if (want > toks_.size()) toks_.set_size(want);
    float next_cutoff = kInf, cost_offset = 0.0f;
    if (best_elem >= 0) {
      int32_t s = toks_.elem(best_elem).key;
      const Token& tok = tokens_[toks_.elem(best_elem).tok];
      cost_offset = -tok.tot_cost;
      const GraphArc* arcs = graph_->arcs(s);
      for (uint32_t j = 0, n = graph_->state(s).narcs; j < n; ++j) {
        const GraphArc& a = arcs[j];
        if (a.il == 0) continue;
        float w = a.w + cost_offset - loglike(frame, a.il) + tok.tot_cost;
        if (w + adaptive_beam < next_cutoff) next_cutoff = w + adaptive_beam;
      }
    }
    cost_offsets_.push_back(cost_offset);
    for (int32_t e = list; e >= 0;) {
      int32_t s = toks_.elem(e).key, tok = toks_.elem(e).tok;
      if (tokens_[tok].tot_cost <= cur_cutoff) {
        const GraphArc* arcs = graph_->arcs(s);
        for (uint32_t j = 0, n = graph_->state(s).narcs; j < n; ++j) {
          const GraphArc& a = arcs[j];
          if (a.il == 0) continue;
          float ac_cost = cost_offset - loglike(frame, a.il), graph_cost = a.w,
                tot_cost = tokens_[tok].tot_cost + ac_cost + graph_cost;
          if (tot_cost >= next_cutoff) continue;
          if (tot_cost + adaptive_beam < next_cutoff) next_cutoff = tot_cost + adaptive_beam;
          int32_t ne = find_or_add(next_state(s, a), frame + 1, tot_cost, nullptr);
          add_link(tok, toks_.elem(ne).tok, a.il, a.ol, graph_cost, ac_cost);
        }
      }
      int32_t tail = toks_.elem(e).tail;
      toks_.drop(e);
      e = tail;
    }
    return next_cutoff;
  }

  void process_nonemitting(float cutoff) {
    int32_t frame = static_cast<int32_t>(active_.size()) - 2;
    queue_.clear();
    for (int32_t e = toks_.head(); e >= 0; e = toks_.elem(e).tail) {
      int32_t s = toks_.elem(e).key;
      if (graph_->state(s).nieps != 0) queue_.push_back(s);
    }
    while (!queue_.empty()) {
      int32_t s = queue_.back();
      queue_.pop_back();
      int32_t tok = toks_.elem(toks_.find(s)).tok;
      float cur_cost = tokens_[tok].tot_cost;
      if (cur_cost >= cutoff) continue;
      delete_links(tok);  // a token taken again: its links are made anew
      const GraphArc* arcs = graph_->arcs(s);
      for (uint32_t j = 0, n = graph_->state(s).narcs; j < n; ++j) {
        const GraphArc& a = arcs[j];
        if (a.il != 0) continue;
        float graph_cost = a.w, tot_cost = cur_cost + graph_cost;
        if (tot_cost < cutoff) {
          bool changed;
          int32_t next = next_state(s, a);
          int32_t ne = find_or_add(next, frame + 1, tot_cost, &changed);
          add_link(tok, toks_.elem(ne).tok, 0, a.ol, graph_cost, 0.0f);
          if (changed && graph_->state(next).nieps != 0) queue_.push_back(next);
        }
      }
    }
  }

  // Links of frame ``f``'s tokens more than the lattice beam off the best path through them
  // are removed, and the tokens' extra costs recomputed, until nothing changes.
  void prune_forward_links(int32_t f, bool* extra_costs_changed, bool* links_pruned,
                           float delta) {
    *extra_costs_changed = false;
    *links_pruned = false;
    bool changed = true;
    while (changed) {
      changed = false;
      for (int32_t tok = active_[f].toks; tok >= 0; tok = tokens_[tok].next) {
        float tok_extra_cost = kInf;
        prune_links(tok, &tok_extra_cost, links_pruned);
        if (std::fabs(tok_extra_cost - tokens_[tok].extra_cost) > delta) changed = true;
        tokens_[tok].extra_cost = tok_extra_cost;
      }
      if (changed) *extra_costs_changed = true;
    }
  }

  // One token's links: those past the lattice beam removed, the least extra cost of the
  // others folded into ``tok_extra_cost``.
  void prune_links(int32_t tok, float* tok_extra_cost, bool* links_pruned) {
    int32_t prev = -1;
    for (int32_t l = tokens_[tok].links; l >= 0;) {
      const Link& link = links_[l];
      const Token& next = tokens_[link.next_tok];
      float link_extra_cost = next.extra_cost + ((tokens_[tok].tot_cost + link.acoustic_cost +
                                                  link.graph_cost) - next.tot_cost);
      int32_t after = link.next;
      if (link_extra_cost > opts_.lattice_beam) {
        if (prev >= 0) links_[prev].next = after;
        else tokens_[tok].links = after;
        links_.drop(l);
        if (links_pruned) *links_pruned = true;
      } else {
        if (link_extra_cost < 0.0f) link_extra_cost = 0.0f;
        if (link_extra_cost < *tok_extra_cost) *tok_extra_cost = link_extra_cost;
        prev = l;
      }
      l = after;
    }
  }

  void prune_tokens(int32_t f) {
    int32_t prev = -1;
    for (int32_t tok = active_[f].toks; tok >= 0;) {
      int32_t next = tokens_[tok].next;
      if (tokens_[tok].extra_cost == kInf) {
        if (prev >= 0) tokens_[prev].next = next;
        else active_[f].toks = next;
        delete_links(tok);
        tokens_.drop(tok);
      } else {
        prev = tok;
      }
      tok = next;
    }
  }

  void prune_active_tokens(float delta) {
    int32_t cur = num_frames_decoded();
    for (int32_t f = cur - 1; f >= 0; --f) {
      if (active_[f].must_prune_forward_links) {
        bool extra_changed = false, pruned = false;
        prune_forward_links(f, &extra_changed, &pruned, delta);
        if (extra_changed && f > 0) active_[f - 1].must_prune_forward_links = true;
        if (pruned) active_[f].must_prune_tokens = true;
        active_[f].must_prune_forward_links = false;
      }
      if (f + 1 < cur && active_[f + 1].must_prune_tokens) {
        prune_tokens(f + 1);
        active_[f + 1].must_prune_tokens = false;
      }
    }
  }

  // The final costs of the newest frame's tokens (those at a final state), the best cost with
  // and without them.
  void compute_final_costs() {
    final_costs_.clear();
    float best = kInf, best_with_final = kInf;
    for (int32_t e = toks_.head(); e >= 0; e = toks_.elem(e).tail) {
      int32_t s = toks_.elem(e).key, tok = toks_.elem(e).tok;
      float final_cost = graph_->state(s).final;
      float cost = tokens_[tok].tot_cost, with_final = cost + final_cost;
      best = std::min(cost, best);
      best_with_final = std::min(with_final, best_with_final);
      if (final_cost != kInf) final_costs_.emplace_back(tok, final_cost);
    }
    final_relative_cost_ =
        (best == kInf && best_with_final == kInf) ? kInf : best_with_final - best;
    final_best_cost_ = best_with_final != kInf ? best_with_final : best;
    std::sort(final_costs_.begin(), final_costs_.end());
  }

  float final_cost(int32_t tok) const {
    auto it = std::lower_bound(final_costs_.begin(), final_costs_.end(),
                               std::make_pair(tok, -kInf));
    return it != final_costs_.end() && it->first == tok ? it->second : kInf;
  }

  void finalize() {
    int32_t last = num_frames_decoded();
    compute_final_costs();
    toks_.drop_all(toks_.clear());
    bool changed = true;
    while (changed) {  // the last frame: extra costs count the final costs
      changed = false;
      for (int32_t tok = active_[last].toks; tok >= 0; tok = tokens_[tok].next) {
        float fc = final_costs_.empty() ? 0.0f : final_cost(tok);
        float tok_extra_cost = tokens_[tok].tot_cost + fc - final_best_cost_;
        prune_links(tok, &tok_extra_cost, nullptr);
        if (tok_extra_cost > opts_.lattice_beam) tok_extra_cost = kInf;
        if (!approx_equal(tokens_[tok].extra_cost, tok_extra_cost, 1.0e-5f)) changed = true;
        tokens_[tok].extra_cost = tok_extra_cost;
      }
    }
    for (int32_t f = last - 1; f >= 0; --f) {
      bool b1, b2;
      prune_forward_links(f, &b1, &b2, 0.0f);
      prune_tokens(f + 1);
    }
    prune_tokens(0);
  }

  // A frame's tokens in an order where every epsilon link goes forward: numbered from the
  // oldest, a token that an epsilon link reaches from a later one moved after it.
  std::vector<int32_t> top_sort(int32_t head) {
    std::vector<int32_t> list;
    for (int32_t tok = head; tok >= 0; tok = tokens_[tok].next) list.push_back(tok);
    int32_t n = static_cast<int32_t>(list.size()), cur = n;
    for (int32_t i = 0; i < n; ++i) pos_[list[i]] = n - 1 - i;
    std::vector<int32_t> todo(list), again;
    for (size_t loops = 0; !todo.empty(); ++loops) {
      if (loops > 1000000) throw py::value_error("epsilon loops in the decoding graph");
      again.clear();
      for (int32_t tok : todo) {
        int32_t p = pos_[tok];
        for (int32_t l = tokens_[tok].links; l >= 0; l = links_[l].next) {
          const Link& link = links_[l];
          if (link.il != 0) continue;
          auto it = pos_.find(link.next_tok);
          if (it != pos_.end() && it->second < p) {
            it->second = cur++;
            again.push_back(link.next_tok);
          }
        }
      }
      todo.swap(again);
    }
    std::vector<int32_t> order(static_cast<size_t>(cur), -1);
    for (int32_t tok : list) order[pos_[tok]] = tok;
    pos_.clear();
    return order;
  }

  // OpenFst's binary VectorFst of a kaldifst.Lattice ("lattice4": weights are float pairs).
  std::string raw_lattice() {
    int32_t frames = num_frames_decoded();
    std::unordered_map<int32_t, int32_t> state_of;
    int64_t num_states = 0, num_arcs = 0;
    for (int32_t f = 0; f <= frames; ++f) {
      if (active_[f].toks < 0) throw py::value_error("the search kept no lattice (all tokens "
                                                     "pruned at frame " + std::to_string(f) +
                                                     ")");
      for (int32_t tok : top_sort(active_[f].toks))
        if (tok >= 0) state_of[tok] = static_cast<int32_t>(num_states++);
    }
    std::vector<std::string> states(static_cast<size_t>(num_states));
    auto put = [](std::string& out, const void* p, size_t n) {
      out.append(static_cast<const char*>(p), n);
    };
    for (int32_t f = 0; f <= frames; ++f) {
      for (int32_t tok = active_[f].toks; tok >= 0; tok = tokens_[tok].next) {
        std::string& out = states[state_of[tok]];
        float fw[2] = {kInf, kInf};
        if (f == frames) {
          if (final_costs_.empty()) fw[0] = fw[1] = 0.0f;
          else if (float c = final_cost(tok); c != kInf) fw[0] = c, fw[1] = 0.0f;
        }
        int64_t k = 0;
        for (int32_t l = tokens_[tok].links; l >= 0; l = links_[l].next) ++k;
        put(out, fw, 8);
        put(out, &k, 8);
        num_arcs += k;
        for (int32_t l = tokens_[tok].links; l >= 0; l = links_[l].next) {
          const Link& link = links_[l];
          float offset = link.il != 0 ? cost_offsets_[f] : 0.0f;
          float w[2] = {link.graph_cost, link.acoustic_cost - offset};
          int32_t next = state_of[link.next_tok];
          put(out, &link.il, 4);
          put(out, &link.ol, 4);
          put(out, w, 8);
          put(out, &next, 4);
        }
      }
    }
    std::string out;
    auto str = [&](const char* s) {
      int32_t n = static_cast<int32_t>(std::strlen(s));
      put(out, &n, 4);
      out += s;
    };
    int32_t magic = 2125659606, version = 2, flags = 0;
    uint64_t props = 0;
    int64_t start = 0;
    put(out, &magic, 4);
    str("vector");
    str("lattice4");
    put(out, &version, 4);
    put(out, &flags, 4);
    put(out, &props, 8);
    put(out, &start, 8);
    put(out, &num_states, 8);
    put(out, &num_arcs, 8);
    for (const std::string& s : states) out += s;
    return out;
  }

  std::shared_ptr<Graph> graph_;
  SearchOptions opts_;
  HashList toks_;
  Pool<Token> tokens_;
  Pool<Link> links_;
  std::vector<FrameToks> active_;
  std::vector<float> cost_offsets_;
  std::vector<std::pair<int32_t, float>> final_costs_;  // sorted by token
  std::vector<float> costs_;
  std::vector<int32_t> queue_;
  std::unordered_map<int32_t, int32_t> pos_;
  float final_relative_cost_ = kInf, final_best_cost_ = kInf;
  const float* loglikes_ = nullptr;
  int32_t num_tids_ = 0;
};

}  // namespace

void register_search(py::module_& m) {
  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph",
                                            "A decoding graph in OpenFst's const layout.")
      .def_property_readonly("num_states", &Graph::num_states)
      .def_property_readonly("num_arcs", &Graph::num_arcs);
  m.def("mapped_graph", &mapped_graph, py::arg("path"), py::arg("start"),
        py::arg("num_states"), py::arg("num_arcs"), py::arg("states_at"), py::arg("arcs_at"),
        "A const FST file's state and arc arrays, mapped read-only and shared.");
  m.def("flat_graph", &flat_graph, py::arg("path"), py::arg("start"), py::arg("final"),
        py::arg("narcs"), py::arg("arcs"),
        "A graph from per-state final costs and arc counts and the arcs (n x 4 int32: "
        "ilabel, olabel, weight bits, next state), in state order.");
  py::class_<Search>(m, "Search", "LatticeFasterDecoder's search over a Graph.")
      .def(py::init<std::shared_ptr<Graph>, float, int32_t, int32_t, float>(),
           py::arg("graph"), py::arg("beam"), py::arg("max_active"), py::arg("min_active"),
           py::arg("lattice_beam"))
      .def("decode", &Search::decode, py::arg("loglikes"),
           "(raw lattice bytes, reached final) of a frames x transition-ids matrix of "
           "acwt-scaled log-likelihoods.");
}

// shared/workload/trace.cpp — see trace.h.
#include "workload/trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "util/json_number.h"
#include "util/text.h"

namespace compcoll::workload {
namespace {

using nlohmann::json;
using sched::Collective;

// The message is printable whatever the trace holds (util/text.h).
[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error(printable(file + ": " + what));
}

// A value of an event that is not of the form the profiler writes; the reader adds the file
// (and the event, where it knows it) to the message.
struct BadValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// e[key], or null where e has no such key (a const json's operator[] must not be asked for a
// missing key).
const json& field(const json& e, const char* key) {
  static const json null;
  if (!e.is_object()) return null;
  const auto it = e.find(key);
  return it == e.end() ? null : *it;
}

// The string e[key]; "" where e has none. BadValue where it is there and not a string.
std::string str_field(const json& e, const char* key) {
  const json& v = field(e, key);
  if (v.is_null()) return "";
  if (!v.is_string()) throw BadValue(std::string("'") + key + "' is " + v.dump() + ", not a string");
  return v.get<std::string>();
}

// The element count e[key]. BadValue where e has none or it is not a whole number >= 0.
uint64_t count_field(const json& e, const char* key) {
  const json& v = field(e, key);
  if (v.is_null()) throw BadValue(std::string("no '") + key + "' (a count of elements)");
  if (const auto n = util::natural_number(v, true)) return *n;
  throw BadValue(std::string("'") + key + "' is " + v.dump() + ", not a count of elements");
}

// elements x size in bytes; BadValue where that passes 2^64.
uint64_t bytes_of(uint64_t elements, size_t size) {
  if (size && elements > UINT64_MAX / size)
    throw BadValue(std::to_string(elements) + " elements of " + std::to_string(size) + " bytes pass 2^64 bytes");
  return elements * size;
}

std::string at_ts(const json& e, double t0) {
  std::ostringstream s;
  const json& name = field(e, "name");
  const json& ts = field(e, "ts");
  s << (name.is_string() ? name.get<std::string>() : std::string("?"));
  if (ts.is_number()) s << " at " << (ts.get<double>() - t0) << " us into the step";
  else s << " (its ts is " << ts.dump() << ")";
  return s.str();
}

// Element size and replay dtype of a trace's type name; 0 when it is not a type we know.
struct TypeInfo {
  size_t size = 0;
  DType dtype = DType::FP32;
  bool floating = false;
};
TypeInfo type_info(std::string t) {
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (t.rfind("c10::", 0) == 0) t = t.substr(5);
  if (t == "float" || t == "float32") return {4, DType::FP32, true};
  if (t == "bfloat16") return {2, DType::BF16, true};
  if (t == "half" || t == "float16") return {2, DType::FP16, true};
  if (t == "double" || t == "float64") return {8, DType::FP32, false};
  if (t == "long" || t == "long int" || t == "int64") return {8, DType::FP32, false};
  if (t == "int" || t == "int32") return {4, DType::FP32, false};
  if (t == "byte" || t == "unsigned char" || t == "char" || t == "bool" || t == "signed char" || t == "uint8" ||
      t == "int8")
    return {1, DType::FP32, false};
  if (t == "short" || t == "int16") return {2, DType::FP32, false};
  return {};
}

// Elements of one Input Dims entry: a tensor's dims [a, b] or a tensor list's [[a], [b, c]].
// BadValue for a dimension that is not a whole number >= 0, or a count past 2^64.
uint64_t elements(const json& dims) {
  if (!dims.is_array()) return 0;
  if (dims.empty()) return 0;
  if (dims[0].is_array()) {
    uint64_t n = 0;
    for (const auto& d : dims) {
      const uint64_t m = elements(d);
      if (m > UINT64_MAX - n) throw BadValue("Input Dims " + dims.dump() + " hold more than 2^64 elements");
      n += m;
    }
    return n;
  }
  uint64_t n = 1;
  for (const auto& d : dims) {
    const auto size = util::natural_number(d);
    if (!size) throw BadValue("Input Dims " + dims.dump() + ": " + d.dump() + " is not a size");
    const uint64_t k = *size;
    if (k && n > UINT64_MAX / k) throw BadValue("Input Dims " + dims.dump() + " hold more than 2^64 elements");
    n *= k;
  }
  return n;
}

// What one c10d op (gloo schema) sends: the collective, the nccl-tests size in elements as a
// function of the group size, and the elements each rank hands to the backend (what its gloo:*
// work shows).
struct OpShape {
  Collective collective = Collective::AllReduce;
  uint64_t size_elements = 0;  // nccl-tests size (before group scaling below)
  bool times_group = false;    // size_elements is per rank: x group size
  uint64_t work_elements = 0;
};
std::optional<OpShape> c10d_shape(const std::string& name, const json& dims) {
  auto arg = [&](size_t i) { return dims.is_array() && i < dims.size() ? elements(dims[i]) : 0; };
  OpShape s;
  if (name == "c10d::allreduce_" || name == "c10d::allreduce_coalesced_") {
    s.size_elements = s.work_elements = arg(0);
  } else if (name == "c10d::broadcast_") {
    s.collective = Collective::Broadcast;
    s.size_elements = s.work_elements = arg(0);
  } else if (name == "c10d::allgather_") {  // (outputs per rank, inputs)
    s.collective = Collective::AllGather;
    s.size_elements = s.work_elements = arg(1);
    s.times_group = true;
  } else if (name == "c10d::_allgather_base_" || name == "c10d::allgather_into_tensor_coalesced_") {  // (output, input)
    s.collective = Collective::AllGather;
    s.size_elements = arg(0);
    s.work_elements = arg(1);
  } else if (name == "c10d::reduce_scatter_") {  // (outputs, inputs per rank)
    s.collective = Collective::ReduceScatter;
    s.size_elements = arg(0);
    s.times_group = true;
    s.work_elements = 0;  // gloo's emulation: matched by time only
  } else if (name == "c10d::_reduce_scatter_base_" || name == "c10d::reduce_scatter_tensor_coalesced_") {  // (output, input)
    s.collective = Collective::ReduceScatter;
    s.size_elements = s.work_elements = arg(1);
  } else if (name == "c10d::alltoall_base_" || name == "c10d::alltoall_") {  // (output, input)
    s.collective = Collective::AllToAll;
    s.size_elements = s.work_elements = arg(1);
  } else {
    return std::nullopt;
  }
  return s;
}

// c10d ops record async_op as their last boolean argument (PyTorch 2.6 and later): 1 when the
// call blocks (False), 0 when it does not, -1 when the trace does not say.
int blocking_of(const json& args) {
  const auto it = args.find("Concrete Inputs");
  if (it == args.end() || !it->is_array()) return -1;
  for (auto v = it->rbegin(); v != it->rend(); ++v)
    if (v->is_string() && (*v == "True" || *v == "False")) return *v == "False" ? 1 : 0;
  return -1;
}

bool is_c10d_sync(const std::string& n) { return n == "c10d::barrier" || n == "c10d::monitored_barrier_"; }
bool is_c10d_p2p(const std::string& n) {
  return n == "c10d::send" || n == "c10d::recv_" || n == "c10d::recv_any_source_" || n == "c10d::reduce_" ||
         n == "c10d::gather_" || n == "c10d::scatter_";
}

// record_param_comms "Collective name".
std::optional<Collective> named_collective(const std::string& n) {
  if (n == "allreduce" || n == "all_reduce" || n == "allreduce_coalesced") return Collective::AllReduce;
  if (n == "allgather" || n == "all_gather" || n == "_allgather_base" || n == "allgather_into_tensor_coalesced" ||
      n == "all_gather_into_tensor")
    return Collective::AllGather;
  if (n == "reduce_scatter" || n == "_reduce_scatter_base" || n == "reduce_scatter_tensor_coalesced" ||
      n == "reduce_scatter_tensor")
    return Collective::ReduceScatter;
  if (n == "all_to_all" || n == "alltoall" || n == "alltoall_base" || n == "all_to_allv") return Collective::AllToAll;
  if (n == "broadcast") return Collective::Broadcast;
  return std::nullopt;
}

// A group's ranks as the profiler writes them: "[0, 1, 2]" (a string) or [0, 1, 2]. BadValue for
// anything else (a rank that is not a whole number from 0 to 2^31 - 1).
std::vector<int> parse_rank_list(const json& v) {
  std::vector<int> r;
  if (v.is_array()) {
    for (const auto& x : v) {
      const auto rank = util::natural_number(x);
      if (!rank || *rank > INT32_MAX) throw BadValue("rank list " + v.dump() + ": " + x.dump() + " is not a rank");
      r.push_back(static_cast<int>(*rank));
    }
    return r;
  }
  if (!v.is_string()) throw BadValue("rank list " + v.dump() + " is neither a string nor an array");
  const std::string s = v.get<std::string>();
  std::string num;
  for (char c : s + ",") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      num += c;
      if (num.size() > 10) throw BadValue("rank list '" + s + "': " + num + "... is not a rank");
    } else if (c == ',' || c == ' ' || c == '[' || c == ']') {
      if (num.empty()) continue;
      const long long k = std::stoll(num);
      if (k > INT32_MAX) throw BadValue("rank list '" + s + "': " + num + " is not a rank");
      r.push_back(static_cast<int>(k));
      num.clear();
    } else {
      throw BadValue("rank list '" + s + "' is not of the form [0, 1, ...]");
    }
  }
  return r;
}

struct ProcessGroup {
  std::string name, desc;
  std::vector<int> ranks;
};

// One event of the file, with its depth among the main thread's events.
struct Ev {
  const json* e = nullptr;
  double ts = 0, end = 0;
  std::string name;
};

double num(const json& e, const char* key) {
  const json& v = field(e, key);
  return v.is_number() ? v.get<double>() : NAN;
}

struct Parsed {
  RankTrace rank;
  int step = -1;              // the ProfilerStep read
  std::set<int> steps;        // every ProfilerStep of the file
  std::vector<std::vector<int>> call_groups;  // per call: the group's job ranks
  int world = 0;
  std::string backend;
};

class FileReader {
 public:
  FileReader(const std::string& file, int want_step) : file_(file), want_step_(want_step) {}

  // The file's step; a value not of the profiler's form is an error naming the file (and the
  // event, where one is at fault).
  Parsed read() {
    try {
      return read_file();
    } catch (const BadValue& e) {
      fail(file_, e.what());
    } catch (const json::exception& e) {
      fail(file_, std::string("an event not of the profiler's form (") + e.what() + ")");
    }
  }

 private:
  Parsed read_file() {
    std::ifstream in(file_, std::ios::binary);
    if (!in) fail(file_, "cannot open the trace");
    json doc;
    try {
      doc = json::parse(in);
    } catch (const json::parse_error& e) {
      fail(file_, std::string("not a JSON trace (byte ") + std::to_string(e.byte) + ")");
    }
    if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
      fail(file_, "no traceEvents array: not a PyTorch profiler (Chrome) trace");
    read_info(doc);
    const json& events = doc["traceEvents"];
    find_step(events);
    collect_main_thread(events);
    if (is_gpu_trace(events)) {
      read_gpu(events);
      if (out_.rank.calls.empty()) fail(file_, "no NCCL kernel launched in " + out_.rank.step);
      build_items();
      return std::move(out_);
    }
    if (!off_thread_.empty())
      fail(file_, off_thread_ + " is on another thread than the step's: a timeline of several issuing threads (a GPU job's "
                                "autograd thread) is not read");
    if (has_record_param_comms_) read_record_param_comms(events);
    else read_c10d(events);
    if (out_.rank.calls.empty())
      fail(file_, "no collective call in " + out_.rank.step + (saw_other_schema_.empty() ? "" : " (" + saw_other_schema_ + ")"));
    build_items();
    return std::move(out_);
  }

  void read_info(const json& doc) {
    const auto di = doc.find("distributedInfo");
    if (di == doc.end() || !di->is_object() || !di->contains("rank") || !di->contains("world_size"))
      fail(file_, "no distributedInfo with rank and world_size (profile after torch.distributed.init_process_group)");
    // A whole number in [0, kMaxTraceRanks]: a fraction or a number past int would be cut
    // short without a word, and a world of billions would be allocated rank by rank.
    const auto rank_number = [&](const char* key) {
      const json& v = (*di)[key];
      const auto n = util::natural_number(v);
      if (!n) fail(file_, std::string("distributedInfo: ") + key + " " + v.dump() + " is not a whole number >= 0");
      if (*n > static_cast<uint64_t>(kMaxTraceRanks))
        fail(file_, std::string("distributedInfo: ") + key + " " + v.dump() + " passes the " +
                        std::to_string(kMaxTraceRanks) + " ranks a trace may have");
      return static_cast<int>(*n);
    };
    out_.rank.rank = rank_number("rank");
    out_.world = rank_number("world_size");
    try {
      out_.backend = di->value("backend", std::string("?"));
      if (di->contains("pg_config") && (*di)["pg_config"].is_array())
        for (const auto& pg : (*di)["pg_config"]) {
          ProcessGroup g;
          g.name = pg.value("pg_name", std::string());
          g.desc = pg.value("pg_desc", std::string());
          if (const json& ranks = field(pg, "ranks"); ranks.is_array() || ranks.is_string()) g.ranks = parse_rank_list(ranks);
          pgs_.push_back(g);
        }
    } catch (const json::exception&) {
      fail(file_, "distributedInfo: backend or pg_config is not of the expected type");
    } catch (const BadValue& e) {
      fail(file_, std::string("distributedInfo.pg_config: ") + e.what());
    }
    if (out_.world < 1 || out_.rank.rank < 0 || out_.rank.rank >= out_.world)
      fail(file_, "distributedInfo: rank " + std::to_string(out_.rank.rank) + " of world_size " + std::to_string(out_.world));
    out_.rank.file = file_;
  }

  void find_step(const json& events) {
    std::vector<std::pair<int, const json*>> steps;
    for (const auto& e : events) {
      if (!e.is_object() || str_field(e, "ph") != "X") continue;
      const std::string name = str_field(e, "name");
      if (name.rfind("ProfilerStep#", 0) != 0) continue;
      try {
        steps.emplace_back(std::stoi(name.substr(13)), &e);
      } catch (const std::exception&) {
        fail(file_, "event '" + name + "': not ProfilerStep#<number>");
      }
    }
    if (steps.empty())
      fail(file_, "no ProfilerStep#N annotation: profile with torch.profiler.schedule(...) and call prof.step() after each step");
    std::sort(steps.begin(), steps.end());
    for (const auto& [n, e] : steps) out_.steps.insert(n);
    const json* step = nullptr;
    if (want_step_ < 0) step = steps.back().second, out_.step = steps.back().first;
    for (const auto& [n, e] : steps)
      if (n == want_step_) step = e, out_.step = n;
    if (!step) {
      std::string have;
      for (const auto& [n, e] : steps) have += (have.empty() ? "" : ", ") + std::to_string(n);
      fail(file_, "no ProfilerStep#" + std::to_string(want_step_) + " (the trace has " + have + ")");
    }
    t0_ = num(*step, "ts");
    t1_ = t0_ + num(*step, "dur");
    out_.rank.step = str_field(*step, "name");
    if (!(t1_ > t0_)) fail(file_, out_.rank.step + ": no positive ts and dur");
    main_tid_ = field(*step, "tid");
    main_pid_ = field(*step, "pid");
    if (main_tid_.is_null() || main_pid_.is_null()) fail(file_, out_.rank.step + ": no pid and tid");
    out_.rank.step_s = (t1_ - t0_) * 1e-6;
  }

  // The main thread's events inside the step, with whether each is inside autograd's backward,
  // and the stretches its innermost CPU ops cover (the leaves: what ran, not what waited).
  void collect_main_thread(const json& events) {
    std::vector<Ev> evs;
    for (const auto& e : events) {
      if (!e.is_object()) continue;
      const std::string name = str_field(e, "name");
      if (name == "record_param_comms") has_record_param_comms_ = true;
      if (name.rfind("nccl:", 0) == 0 && saw_other_schema_.empty())
        saw_other_schema_ = "the trace has " + name + " annotations but neither record_param_comms nor c10d ops";
      if (str_field(e, "ph") != "X" || name.rfind("ProfilerStep#", 0) == 0) continue;
      const bool call = (name == "record_param_comms" && field(e, "args").is_object() &&
                         !std::set<std::string>{"", "wait", "barrier", "coalesced"}.count(
                             str_field(field(e, "args"), "Collective name"))) ||
                        (name.rfind("c10d::", 0) == 0 && c10d_shape(name, json::array()).has_value());
      const double ts = num(e, "ts"), dur = num(e, "dur");
      if (!std::isfinite(ts) || !(dur >= 0)) {
        if (call) fail(file_, at_ts(e, t0_) + ": a collective call without a time (ts " + field(e, "ts").dump() +
                                  ", dur " + field(e, "dur").dump() + ")");
        continue;
      }
      if (ts < t0_ || ts >= t1_) continue;
      if (field(e, "tid") != main_tid_ || field(e, "pid") != main_pid_) {
        if (call && off_thread_.empty() && field(e, "pid") == main_pid_) off_thread_ = at_ts(e, t0_);
        continue;
      }
      evs.push_back({&e, ts, std::min(ts + dur, t1_), name});
    }
    std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.ts != b.ts ? a.ts < b.ts : a.end > b.end; });
    std::vector<const Ev*> stack, ops;
    for (auto& ev : evs) {
      while (!stack.empty() && stack.back()->end <= ev.ts) stack.pop_back();
      bool in_backward = false;
      for (const Ev* s : stack)
        if (s->name.rfind("autograd::engine::evaluate_function", 0) == 0) in_backward = true;
      main_.push_back({ev, in_backward});
      stack.push_back(&ev);
      if (str_field(*ev.e, "cat") == "cpu_op") ops.push_back(&ev);
    }
    for (size_t i = 0; i < ops.size(); ++i)
      if (i + 1 == ops.size() || ops[i + 1]->ts >= ops[i]->end) leaves_.emplace_back(ops[i]->ts, ops[i]->end);
  }

  // gloo:* annotations on worker threads, sorted by start.
  struct Work {
    double ts, end;
    uint64_t elements;
    std::string type;
    json tid;
    bool used = false;
  };
  std::vector<Work> gloo_work(const json& events) const {
    std::vector<Work> w;
    for (const auto& e : events) {
      if (!e.is_object() || str_field(e, "ph") != "X") continue;
      const std::string name = str_field(e, "name");
      if (name.rfind("gloo:", 0) != 0 || field(e, "pid") != main_pid_) continue;
      const json& args = field(e, "args");
      std::string type;
      if (args.contains("Input type") && args["Input type"].is_array() && !args["Input type"].empty() &&
          args["Input type"][0].is_string())
        type = args["Input type"][0].get<std::string>();
      w.push_back({num(e, "ts"), num(e, "ts") + num(e, "dur"),
                   args.contains("Input Dims") && args["Input Dims"].is_array() && !args["Input Dims"].empty()
                       ? elements(args["Input Dims"][0]) : 0,
                   type, field(e, "tid")});
    }
    std::sort(w.begin(), w.end(), [](const Work& a, const Work& b) { return a.ts < b.ts; });
    return w;
  }

  // Worker threads -> this rank's process groups. gloo starts each group's worker threads (the
  // same number per group, 2 by default) when the group is made, and groups are made in
  // pg_config's order, so sorted by id the threads come group by group in that order. One-rank
  // groups are set aside; groups that ran nothing in the step leave no threads, so the default
  // group is set aside too when the threads do not split evenly otherwise; then what cannot be
  // split evenly is refused.
  std::map<json, size_t> thread_groups(const std::vector<Work>& work, const std::vector<bool>& used) {
    std::set<int64_t> tid_set;
    for (size_t i = 0; i < work.size(); ++i)
      if (used[i]) {
        if (!work[i].tid.is_number_integer()) fail(file_, "gloo work on a thread without a numeric id");
        tid_set.insert(work[i].tid.get<int64_t>());
      }
    const std::vector<int64_t> tids(tid_set.begin(), tid_set.end());
    std::vector<size_t> cand(pgs_.size());
    for (size_t i = 0; i < cand.size(); ++i) cand[i] = i;
    auto fits = [&] { return !cand.empty() && cand.size() <= tids.size() && tids.size() % cand.size() == 0; };
    auto drop = [&](auto pred) {
      for (size_t i = 0; i < cand.size() && !fits();)
        if (pred(pgs_[cand[i]])) cand.erase(cand.begin() + static_cast<std::ptrdiff_t>(i));
        else ++i;
    };
    for (size_t i = 0; i < cand.size();)  // a one-rank group's calls are local copies
      if (pgs_[cand[i]].ranks.size() <= 1) cand.erase(cand.begin() + static_cast<std::ptrdiff_t>(i));
      else ++i;
    if (!fits()) drop([](const ProcessGroup& g) { return g.desc == "default_pg" || g.name == "0"; });
    if (!fits())
      fail(file_, std::to_string(tids.size()) + " gloo worker threads ran collectives and distributedInfo.pg_config lists " +
                      std::to_string(pgs_.size()) + " process groups of this rank: cannot tell which group ran which call");
    const size_t per = tids.size() / cand.size();
    std::map<json, size_t> out;
    for (size_t i = 0; i < tids.size(); ++i) out[json(tids[i])] = cand[i / per];
    return out;
  }

  // gloo schema: c10d::* ops on the main thread, each matched to the gloo:* work it queued
  // (the first unmatched work of its element count that starts after the op does).
  void read_c10d(const json& events) {
    std::vector<Work> work = gloo_work(events);
    std::vector<bool> used(work.size(), false);
    struct Pending {
      size_t call;
      size_t work;
    };
    std::vector<Pending> pend;
    for (const auto& [ev, backward] : main_) {
      if (ev.name.rfind("c10d::", 0) != 0 || is_c10d_sync(ev.name)) continue;
      if (is_c10d_p2p(ev.name))
        fail(file_, at_ts(*ev.e, t0_) + ": point-to-point and rooted calls (send, recv, reduce, gather, scatter) are not replayed");
      const json& args = field(*ev.e, "args");
      std::optional<OpShape> shape;
      try {
        shape = c10d_shape(ev.name, field(args, "Input Dims"));
      } catch (const BadValue& e) {
        fail(file_, at_ts(*ev.e, t0_) + ": " + e.what());
      }
      if (!shape) continue;  // c10d::wait and the like: timing only
      if (shape->size_elements == 0) fail(file_, at_ts(*ev.e, t0_) + ": no Input Dims (profile with record_shapes=True)");
      size_t w = work.size();
      for (size_t i = 0; i < work.size(); ++i)
        if (!used[i] && work[i].ts >= ev.ts - 1.0 && (shape->work_elements == 0 || work[i].elements == shape->work_elements)) {
          w = i;
          break;
        }
      if (w == work.size()) fail(file_, at_ts(*ev.e, t0_) + ": no gloo:* work on a worker thread matches it");
      used[w] = true;
      TraceCall c;
      c.collective = shape->collective;
      c.name = ev.name;
      const TypeInfo ti = type_info(work[w].type);
      if (ti.size == 0) fail(file_, at_ts(*ev.e, t0_) + ": unknown element type '" + work[w].type + "'");
      c.dtype = ti.dtype;
      c.tensor = ti.floating ? "?" : "";
      try {
        c.bytes = bytes_of(shape->size_elements, ti.size);  // x group size below when per rank
      } catch (const BadValue& e) {
        fail(file_, at_ts(*ev.e, t0_) + ": " + e.what());
      }
      c.backward = backward;
      c.issue_s = (ev.ts - t0_) * 1e-6;
      c.start_s = (work[w].ts - t0_) * 1e-6;
      c.end_s = (work[w].end - t0_) * 1e-6;
      if (shape->times_group) c.name += "*";  // marker: bytes are per rank until the group is known
      out_.rank.calls.push_back(c);
      meta_.push_back({(ev.end - t0_) * 1e-6, blocking_of(args)});
      pend.push_back({out_.rank.calls.size() - 1, w});
    }
    if (pend.empty()) return;
    const auto groups = thread_groups(work, used);
    for (const auto& p : pend) {
      TraceCall& c = out_.rank.calls[p.call];
      const auto& ranks = pgs_[groups.at(work[p.work].tid)].ranks;
      if (!c.name.empty() && c.name.back() == '*') {
        c.name.pop_back();
        c.bytes *= ranks.size();
      }
      out_.call_groups.push_back(ranks);
    }
  }

  // A call from args in record_param_comms' form (on the CPU op, or on an NCCL kernel): the
  // collective, nccl-tests size and dtype, and the group's ranks (on the event, else
  // pg_config's group of that name). nullopt for pseudo-calls (wait, barrier) and empty calls.
  std::optional<std::pair<TraceCall, std::vector<int>>> call_from_args(const json& a, const std::string& where) const {
    try {
      if (!a.is_object()) throw BadValue("its args are " + a.dump() + ", not an object");
      const std::string cname = str_field(a, "Collective name");
      if (cname == "wait" || cname == "barrier" || cname == "coalesced") return std::nullopt;
      const auto coll = named_collective(cname);
      if (!coll) throw BadValue("collective '" + cname + "' is not replayed");
      const std::string dtype = str_field(a, "dtype");
      const TypeInfo ti = type_info(dtype);
      if (ti.size == 0) throw BadValue("unknown dtype '" + dtype + "'");
      const json& listed = field(a, "Process Group Ranks");
      std::vector<int> ranks = listed.is_null() ? std::vector<int>{} : parse_rank_list(listed);
      if (ranks.empty()) {
        const std::string pg = str_field(a, "Process Group Name");
        for (const auto& g : pgs_)
          if (g.name == pg) ranks = g.ranks;
      }
      if (ranks.empty()) throw BadValue("no 'Process Group Ranks' and no pg_config entry for its group");
      // nccl-tests' size: an allgather's output, any other call's input. The other count is
      // checked where the event has it.
      const bool gathers = *coll == Collective::AllGather;
      const char* size_key = gathers ? "Out msg nelems" : "In msg nelems";
      const char* other_key = gathers ? "In msg nelems" : "Out msg nelems";
      if (!field(a, other_key).is_null()) count_field(a, other_key);
      TraceCall c;
      c.collective = *coll;
      c.name = cname;
      c.dtype = ti.dtype;
      c.tensor = ti.floating ? "?" : "";
      c.bytes = bytes_of(count_field(a, size_key), ti.size);
      if (c.bytes == 0) return std::nullopt;
      return std::make_pair(c, ranks);
    } catch (const BadValue& e) {
      fail(file_, where + ": " + e.what());
    }
  }

  // record_param_comms: the group's ranks and sizes on the event; executed where a gloo:* work
  // of the same elements ran, or over the event itself.
  void read_record_param_comms(const json& events) {
    std::vector<Work> work = gloo_work(events);
    for (const auto& [ev, backward] : main_) {
      if (ev.name != "record_param_comms") continue;
      const json& a = field(*ev.e, "args");
      if (!a.is_object() || str_field(a, "Collective name").empty())
        fail(file_, at_ts(*ev.e, t0_) + ": record_param_comms without 'Collective name'");
      auto parsed = call_from_args(a, at_ts(*ev.e, t0_));
      if (!parsed) continue;
      auto& [c, ranks] = *parsed;
      const uint64_t in = field(a, "In msg nelems").is_null() ? 0 : count_field(a, "In msg nelems");  // checked above
      c.backward = backward;
      c.issue_s = c.start_s = (ev.ts - t0_) * 1e-6;
      c.end_s = (ev.end - t0_) * 1e-6;
      for (auto& w : work)
        if (!w.used && w.ts >= ev.ts - 1.0 && w.elements == in) {
          w.used = true;
          c.start_s = (w.ts - t0_) * 1e-6;
          c.end_s = (w.end - t0_) * 1e-6;
          break;
        }
      out_.rank.calls.push_back(c);
      meta_.push_back({(ev.end - t0_) * 1e-6, -1});
      out_.call_groups.push_back(ranks);
    }
  }

  static bool is_nccl_kernel(const json& e) {
    const std::string n = str_field(e, "name");
    return str_field(e, "cat") == "kernel" && (n.rfind("ncclKernel", 0) == 0 || n.rfind("ncclDevKernel", 0) == 0);
  }
  static bool is_gpu_trace(const json& events) {
    for (const auto& e : events)
      if (e.is_object() && is_nccl_kernel(e)) return true;
    return false;
  }

  // A GPU job: the timeline is the GPU's. The step's GPU work is what the CPU launched inside
  // the ProfilerStep (cuda_runtime / cuda_driver events, matched by correlation id), from its
  // first start to its last end; the compute lane is every non-NCCL kernel, copy and memset on
  // any stream; each NCCL kernel (its args: collective, element counts, dtype, group ranks) is
  // a call, issued when it started (NCCL's stream waits for the compute it depends on, and the
  // kernel starts before its peers arrive) and waited on where the compute lane resumed right
  // after it. Backward: the launch was inside autograd's evaluate_function on its thread.
  void read_gpu(const json& events) {
    std::set<int64_t> launched;
    std::map<int64_t, std::pair<json, double>> launch_at;  // correlation -> (thread, time)
    std::map<json, std::vector<std::pair<double, double>>> autograd;  // thread -> intervals
    for (const auto& e : events) {
      if (!e.is_object() || str_field(e, "ph") != "X" || field(e, "pid") != main_pid_) continue;
      const std::string cat = str_field(e, "cat");
      const double ts = num(e, "ts"), dur = num(e, "dur");
      if (!std::isfinite(ts)) continue;
      if (str_field(e, "name").rfind("autograd::engine::evaluate_function", 0) == 0)
        autograd[field(e, "tid")].emplace_back(ts, ts + dur);
      const json& corr = field(field(e, "args"), "correlation");
      if ((cat == "cuda_runtime" || cat == "cuda_driver") && ts >= t0_ && ts < t1_ && corr.is_number_integer()) {
        const int64_t c = corr.get<int64_t>();
        launched.insert(c);
        launch_at[c] = {field(e, "tid"), ts};
      }
    }
    struct Gpu {
      const json* e;
      double ts, end;
    };
    std::vector<Gpu> gpu;
    double g0 = INFINITY, g1 = -INFINITY;
    for (const auto& e : events) {
      if (!e.is_object() || str_field(e, "ph") != "X") continue;
      const std::string cat = str_field(e, "cat");
      if (cat != "kernel" && cat != "gpu_memcpy" && cat != "gpu_memset") continue;
      // An NCCL kernel is a call: one that cannot be placed is an error, not a call left out.
      const bool nccl = is_nccl_kernel(e);
      const json& corr = field(field(e, "args"), "correlation");
      if (!corr.is_number_integer()) {
        if (nccl) fail(file_, at_ts(e, t0_) + ": an NCCL kernel without an integer 'correlation' in its args");
        continue;
      }
      if (!launched.count(corr.get<int64_t>())) continue;
      const double ts = num(e, "ts"), dur = num(e, "dur");
      if (!std::isfinite(ts) || !(dur >= 0)) {
        if (nccl) fail(file_, at_ts(e, t0_) + ": an NCCL kernel without a time (ts " + field(e, "ts").dump() + ", dur " +
                                  field(e, "dur").dump() + ")");
        continue;
      }
      gpu.push_back({&e, ts, ts + dur});
      g0 = std::min(g0, ts);
      g1 = std::max(g1, ts + dur);
    }
    if (gpu.empty()) fail(file_, "no GPU work launched in " + out_.rank.step + " (profile with ProfilerActivity.CUDA)");
    std::sort(gpu.begin(), gpu.end(), [](const Gpu& a, const Gpu& b) { return a.ts < b.ts; });
    t0_ = g0;  // times from the step's first GPU work
    out_.rank.step_s = (g1 - g0) * 1e-6;
    leaves_.clear();
    for (const auto& g : gpu) {
      if (!is_nccl_kernel(*g.e)) {
        leaves_.emplace_back(g.ts, g.end);
        continue;
      }
      const json& a = field(*g.e, "args");
      const std::string kname = str_field(*g.e, "name");
      std::ostringstream at;
      at << kname.substr(0, kname.find('(')) << " at " << g.ts - g0 << " us into the step's GPU work";
      if (str_field(a, "Collective name").empty())
        fail(file_, at.str() + ": an NCCL kernel without 'Collective name' (an older PyTorch schema): not read");
      auto parsed = call_from_args(a, at.str());
      if (!parsed) continue;
      auto& [c, ranks] = *parsed;
      c.issue_s = c.start_s = (g.ts - g0) * 1e-6;
      c.end_s = (g.end - g0) * 1e-6;
      const auto la = launch_at.find(field(a, "correlation").get<int64_t>());
      if (la != launch_at.end())
        for (const auto& [s0, s1] : autograd[la->second.first])
          if (s0 <= la->second.second && la->second.second < s1) c.backward = true;
      out_.rank.calls.push_back(c);
      out_.call_groups.push_back(ranks);
      meta_.push_back({c.end_s, 0});  // asynchronous to the compute lane
    }
  }

  // The timeline. A blocking call (async_op=False on its c10d op) is waited on from the end of
  // its op until it finished. An asynchronous call is waited on where the main thread, idle
  // (no CPU op running), resumed within kResume of its end: the thread was blocked on it. All
  // else in the step is compute (ops, and idle time no call explains: Python between ops).
  void build_items() {
    // A thread blocked on a call is taken to wake within this of the call's end; an idle
    // stretch that ends later is compute (Python between ops), not a wait.
    constexpr double kResume = 1e-3;
    auto& r = out_.rank;
    struct Wait {
      double start, end;
      size_t call;
    };
    std::vector<Wait> waits;
    for (size_t c = 0; c < r.calls.size(); ++c)
      if (meta_[c].blocking == 1 && r.calls[c].end_s > meta_[c].op_end_s)
        waits.push_back({meta_[c].op_end_s, r.calls[c].end_s, c});
    std::vector<std::pair<double, double>> busy;  // merged leaf ops, seconds from the step start
    for (const auto& [a, b] : leaves_) {
      const double s = (a - t0_) * 1e-6, e = (b - t0_) * 1e-6;
      if (!busy.empty() && s <= busy.back().second) busy.back().second = std::max(busy.back().second, e);
      else busy.emplace_back(s, e);
    }
    std::vector<std::pair<double, double>> gaps;
    double cur = 0;
    for (const auto& [s, e] : busy) {
      if (s > cur) gaps.emplace_back(cur, s);
      cur = std::max(cur, e);
    }
    if (r.step_s > cur) gaps.emplace_back(cur, r.step_s);
    for (const auto& [g0, g1] : gaps) {
      size_t best = r.calls.size();
      for (size_t c = 0; c < r.calls.size(); ++c) {
        const TraceCall& k = r.calls[c];
        if (meta_[c].blocking != 1 && k.issue_s < g1 && k.end_s > std::max(g0, k.issue_s) && k.end_s <= g1 &&
            g1 - k.end_s <= kResume && (best == r.calls.size() || k.end_s > r.calls[best].end_s))
          best = c;
      }
      // Waiting from the gap's start, or from the call's issue when it came later (a GPU's NCCL
      // kernel can start after the compute went idle).
      if (best < r.calls.size()) waits.push_back({std::max(g0, r.calls[best].issue_s), r.calls[best].end_s, best});
    }
    std::sort(waits.begin(), waits.end(), [](const Wait& a, const Wait& b) { return a.start < b.start; });
    struct Mark {
      double t;
      int type;  // 0 issue, 1 wait
      size_t call;
      double wait;
    };
    std::vector<Mark> marks;
    for (size_t c = 0; c < r.calls.size(); ++c) marks.push_back({r.calls[c].issue_s, 0, c, 0});
    double waited = 0, last = 0;
    for (auto w : waits) {  // overlapping waits: the later one starts where the earlier ended
      w.start = std::max(w.start, last);
      if (w.end <= w.start) continue;
      marks.push_back({w.start, 1, w.call, w.end - w.start});
      waited += w.end - w.start;
      last = w.end;
    }
    std::sort(marks.begin(), marks.end(), [](const Mark& a, const Mark& b) { return a.t != b.t ? a.t < b.t : a.type < b.type; });
    double t = 0;
    for (const auto& m : marks) {
      if (m.t > t) r.items.push_back({TraceItem::Type::Compute, m.t - t, 0});
      t = std::max(t, m.t);
      r.items.push_back({m.type == 0 ? TraceItem::Type::Issue : TraceItem::Type::Wait, 0, m.call});
      if (m.type == 1) t += m.wait;
    }
    if (r.step_s > t) r.items.push_back({TraceItem::Type::Compute, r.step_s - t, 0});
    r.compute_s = r.step_s - waited;
  }

  std::string file_;
  int want_step_;
  Parsed out_;
  std::vector<ProcessGroup> pgs_;
  std::string off_thread_;  // a call issued on another thread of the process, if any
  double t0_ = 0, t1_ = 0;
  json main_tid_, main_pid_;
  bool has_record_param_comms_ = false;
  std::string saw_other_schema_;
  std::vector<std::pair<Ev, bool>> main_;            // (event, inside backward), by start
  std::vector<std::pair<double, double>> leaves_;    // innermost CPU ops (trace us)
  struct CallMeta {
    double op_end_s = 0;  // the issuing op's end, from the step start
    int blocking = -1;    // 1: async_op=False, 0: async_op=True, -1: not recorded
  };
  std::vector<CallMeta> meta_;                       // per call
};

// Coordinates of a job rank in the layout: (pp stage, dp rank, tp rank).
struct Coord {
  int pp, dp, tp;
};
Coord coord(int r, const TraceLayout& l) { return {r / (l.tp * l.dp), (r / l.tp) % l.dp, r % l.tp}; }
int rank_at(const Coord& c, const TraceLayout& l) { return (c.pp * l.dp + c.dp) * l.tp + c.tp; }

std::string group_label(const std::vector<int>& ranks, const TraceLayout& l, int world) {
  bool same_pp = true, same_dp = true, same_tp = true;
  const Coord c0 = coord(ranks[0], l);
  for (int r : ranks) {
    const Coord c = coord(r, l);
    same_pp &= c.pp == c0.pp;
    same_dp &= c.dp == c0.dp;
    same_tp &= c.tp == c0.tp;
  }
  const int n = static_cast<int>(ranks.size());
  if (same_pp && same_dp && n == l.tp) return "tp";
  if (same_pp && same_tp && n == l.dp) return "dp";
  if (same_dp && same_tp && n == l.pp) return "pp";
  if (n == world) return "world";
  return "group";
}

// A call as the errors name it: its name and when it was issued, as at_ts names an event.
std::string call_at(const TraceCall& c) {
  std::ostringstream s;
  s << c.name << " at " << c.issue_s * 1e6 << " us into the step";
  return s.str();
}

std::string layout_name(const TraceLayout& l) {
  return "dp " + std::to_string(l.dp) + " x tp " + std::to_string(l.tp) + " x pp " + std::to_string(l.pp);
}

std::string tensor_kind(const TraceCall& c, const std::string& label) {
  if (c.tensor.empty()) return "";  // integer data: no codec model
  if (c.collective == Collective::AllToAll) return c.backward ? "actgrad" : "moe-dispatch";
  if (label == "dp" || label == "world") {
    if (c.collective == Collective::AllGather || c.collective == Collective::Broadcast) return "param";
    return "grad";
  }
  return c.backward ? "actgrad" : "act";
}

// Calls of each group must be the same on every member, in the same order.
void check_matching(const TraceJob& job) {
  for (size_t g = 0; g < job.groups.size(); ++g) {
    const auto& members = job.groups[g].ranks;
    std::vector<std::vector<size_t>> seq(members.size());
    for (size_t m = 0; m < members.size(); ++m)
      for (size_t c = 0; c < job.ranks[static_cast<size_t>(members[m])].calls.size(); ++c)
        if (job.ranks[static_cast<size_t>(members[m])].calls[c].group == g) seq[m].push_back(c);
    const auto& r0 = job.ranks[static_cast<size_t>(members[0])];
    for (size_t m = 1; m < members.size(); ++m) {
      const auto& rm = job.ranks[static_cast<size_t>(members[m])];
      for (size_t k = 0; k < std::max(seq[0].size(), seq[m].size()); ++k) {
        auto describe = [&](const RankTrace& r, const std::vector<size_t>& s) {
          if (k >= s.size()) return std::string("no call");
          const TraceCall& c = r.calls[s[k]];
          return c.name + " of " + std::to_string(c.bytes) + " bytes";
        };
        const bool same = k < seq[0].size() && k < seq[m].size() &&
                          r0.calls[seq[0][k]].collective == rm.calls[seq[m][k]].collective &&
                          r0.calls[seq[0][k]].bytes == rm.calls[seq[m][k]].bytes;
        if (!same)
          fail(rm.file, "call " + std::to_string(k) + " on the " + job.groups[g].label + " group of ranks " +
                            json(members).dump() + " is " + describe(rm, seq[m]) + ", but " + describe(r0, seq[0]) +
                            " on rank " + std::to_string(r0.rank) + " (" + r0.file + ")");
      }
    }
  }
}

// An SPMD job from the one rank traced: every other rank gets the same step, each call on the
// group the traced rank's group becomes when moved, in the layout's grid (pp, dp, tp, each
// modulo its size), from the traced rank to this one: its own tp, dp, pp or world group.
void spmd_ranks(std::vector<std::optional<Parsed>>& by_rank, const TraceLayout& l) {
  const auto given = std::find_if(by_rank.begin(), by_rank.end(), [](const auto& p) { return p.has_value(); });
  const Parsed& p0 = **given;
  const Coord c0 = coord(p0.rank.rank, l);
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank[r]) continue;
    Parsed p = p0;
    p.rank.rank = static_cast<int>(r);
    const Coord cr = coord(static_cast<int>(r), l);
    for (auto& group : p.call_groups)
      for (int& m : group) {
        const Coord cm = coord(m, l);
        m = rank_at({(cr.pp + cm.pp - c0.pp + l.pp) % l.pp, (cr.dp + cm.dp - c0.dp + l.dp) % l.dp,
                     (cr.tp + cm.tp - c0.tp + l.tp) % l.tp},
                    l);
      }
    by_rank[r] = std::move(p);
  }
}

}  // namespace

TraceJob load_trace(const std::vector<std::string>& files, const TraceLayout& layout_in, int step, bool spmd) {
  if (files.empty()) throw std::runtime_error("no trace files");
  TraceJob job;
  std::vector<std::optional<Parsed>> by_rank;
  for (const auto& f : files) {
    Parsed p = FileReader(f, step).read();
    if (job.world == 0) {
      job.world = p.world;
      job.backend = p.backend;
      by_rank.resize(static_cast<size_t>(p.world));
    } else if (p.world != job.world) {
      fail(f, "world_size " + std::to_string(p.world) + ", but " + files[0] + " says " + std::to_string(job.world));
    }
    auto& slot = by_rank[static_cast<size_t>(p.rank.rank)];
    if (slot) fail(f, "rank " + std::to_string(p.rank.rank) + " again (also " + slot->rank.file + ")");
    slot = std::move(p);
  }
  TraceLayout& l = job.layout;
  l = layout_in;
  if (l.dp == 0) {
    if (job.world % (l.tp * l.pp))
      throw std::runtime_error("the job's " + std::to_string(job.world) + " ranks are not a multiple of tp x pp = " +
                               std::to_string(l.tp * l.pp));
    l.dp = job.world / (l.tp * l.pp);
  }
  if (l.dp * l.tp * l.pp != job.world)
    throw std::runtime_error("layout dp x tp x pp = " + std::to_string(l.dp * l.tp * l.pp) + ", but the job has " +
                             std::to_string(job.world) + " ranks");
  if (spmd) {
    if (files.size() != 1)
      fail(files[0], "spmd: one rank's trace stands for every rank; " + std::to_string(files.size()) + " files given");
    spmd_ranks(by_rank, l);
  }
  std::string missing;
  for (size_t r = 0; r < by_rank.size(); ++r)
    if (!by_rank[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  if (!missing.empty())
    fail(files[0], "a job of " + std::to_string(job.world) + " ranks, but no trace of rank " + missing +
                       " (give one file per rank, or one with spmd: true)");
  // Without a step asked for: the last one every file has, read again where it is not the last.
  if (step < 0) {
    std::set<int> common = by_rank[0]->steps;
    for (const auto& p : by_rank)
      if (p) {
        std::set<int> both;
        for (int n : p->steps)
          if (common.count(n)) both.insert(n);
        common = both;
      }
    if (common.empty()) fail(files[0], "no ProfilerStep#N that every rank's trace has");
    for (auto& p : by_rank)
      if (p && p->step != *common.rbegin()) p = FileReader(p->rank.file, *common.rbegin()).read();
  }


  std::map<std::vector<int>, size_t> group_index;
  for (auto& p : by_rank) {
    RankTrace& r = p->rank;
    for (size_t c = 0; c < r.calls.size(); ++c) {
      std::vector<int> ranks = p->call_groups[c];
      std::sort(ranks.begin(), ranks.end());
      for (int x : ranks)
        if (x < 0 || x >= job.world)
          fail(r.file, call_at(r.calls[c]) + ": group rank " + std::to_string(x) + " is outside the job of " +
                           std::to_string(job.world) + " ranks");
      if (std::find(ranks.begin(), ranks.end(), r.rank) == ranks.end())
        fail(r.file, call_at(r.calls[c]) + ": its group " + json(ranks).dump() + " does not hold this rank (" +
                         std::to_string(r.rank) + ")");
      auto [it, fresh] = group_index.try_emplace(ranks, job.groups.size());
      if (fresh) job.groups.push_back({ranks, group_label(ranks, l, job.world)});
      TraceCall& call = r.calls[c];
      call.group = it->second;
      const std::string& label = job.groups[call.group].label;
      // A group the layout does not name would get the wrong tensor kind (and could not be
      // scaled): the layout given is not the job's.
      if (label == "group")
        fail(r.file, call_at(call) + ": its group of ranks " + json(ranks).dump() + " is none of the tp, dp, pp or world " +
                         "groups of the layout " + layout_name(l) + ": the layout does not fit the traced groups " +
                         "(workload.layout gives the job's tp and pp; groups of other kinds, such as " +
                         "expert-parallel ones, are not replayed)");
      call.tensor = tensor_kind(call, label);
      call.kind = label + "-" + std::string(sched::collective_name(call.collective));
    }
    job.ranks.push_back(std::move(r));
  }
  check_matching(job);
  return job;
}

TraceJob scale_data_parallel(const TraceJob& job, int k) {
  if (k < 1) throw std::invalid_argument("scale_dp: expected a positive factor");
  if (k == 1) return job;
  if (int64_t{job.world} * k > kMaxTraceRanks)
    throw std::runtime_error("scale_dp " + std::to_string(k) + ": " + std::to_string(job.world) + " x " +
                             std::to_string(k) + " ranks pass the " + std::to_string(kMaxTraceRanks) +
                             " ranks a job may have");
  const TraceLayout& l = job.layout;
  TraceJob out;
  out.backend = job.backend;
  out.world = job.world * k;
  out.layout = {l.dp * k, l.tp, l.pp};
  auto map_rank = [&](int r, int replica) {  // replica's copy of rank r: dp rank replica x dp + its own
    const Coord c = coord(r, l);
    return rank_at({c.pp, replica * l.dp + c.dp, c.tp}, out.layout);
  };
  // group index [old group][replica] -> new group (a grown group: the same for every replica)
  std::vector<std::vector<size_t>> gmap(job.groups.size(), std::vector<size_t>(static_cast<size_t>(k)));
  for (size_t g = 0; g < job.groups.size(); ++g) {
    const auto& grp = job.groups[g];
    if (grp.label == "group") {  // load_trace refuses these; a job built otherwise may hold one
      for (const RankTrace& r : job.ranks)
        for (const TraceCall& c : r.calls)
          if (c.group == g)
            fail(r.file, "scale_dp: " + call_at(c) + ": its group of ranks " + json(grp.ranks).dump() +
                             " is none of the tp, dp, pp or world groups of the layout " + layout_name(l));
      throw std::runtime_error("scale_dp: the group of ranks " + json(grp.ranks).dump() +
                               " is none of the tp, dp, pp or world groups of the layout " + layout_name(l));
    }
    const bool grows = grp.label == "dp" || grp.label == "world";
    if (grows) {
      TraceGroup ng{{}, grp.label};
      for (int rep = 0; rep < k; ++rep)
        for (int r : grp.ranks) ng.ranks.push_back(map_rank(r, rep));
      std::sort(ng.ranks.begin(), ng.ranks.end());
      out.groups.push_back(ng);
      for (int rep = 0; rep < k; ++rep) gmap[g][static_cast<size_t>(rep)] = out.groups.size() - 1;
    } else {
      for (int rep = 0; rep < k; ++rep) {
        TraceGroup ng{{}, grp.label};
        for (int r : grp.ranks) ng.ranks.push_back(map_rank(r, rep));
        std::sort(ng.ranks.begin(), ng.ranks.end());
        out.groups.push_back(ng);
        gmap[g][static_cast<size_t>(rep)] = out.groups.size() - 1;
      }
    }
  }
  out.ranks.resize(static_cast<size_t>(out.world));
  for (int rep = 0; rep < k; ++rep)
    for (const RankTrace& r : job.ranks) {
      RankTrace nr = r;
      nr.rank = map_rank(r.rank, rep);
      for (TraceCall& c : nr.calls) {
        const bool grows = job.groups[c.group].label == "dp" || job.groups[c.group].label == "world";
        if (grows && (c.collective == Collective::AllGather || c.collective == Collective::ReduceScatter ||
                      c.collective == Collective::AllToAll))
          c.bytes *= static_cast<uint64_t>(k);
        c.group = gmap[c.group][static_cast<size_t>(rep)];
      }
      out.ranks[static_cast<size_t>(nr.rank)] = std::move(nr);
    }
  return out;
}

std::vector<std::vector<double>> traced_call_seconds(const TraceJob& job) {
  std::map<std::pair<size_t, size_t>, std::pair<double, double>> span;  // (group, k) -> (latest start, earliest end)
  for (const auto& r : job.ranks) {
    std::vector<size_t> count(job.groups.size(), 0);
    for (const auto& c : r.calls) {
      auto [it, fresh] = span.try_emplace({c.group, count[c.group]++}, c.start_s, c.end_s);
      if (!fresh) it->second = {std::max(it->second.first, c.start_s), std::min(it->second.second, c.end_s)};
    }
  }
  std::vector<std::vector<double>> out(job.ranks.size());
  size_t r = 0;
  for (const auto& rank : job.ranks) {
    std::vector<size_t> count(job.groups.size(), 0);
    for (const auto& c : rank.calls) {
      const auto& [start, end] = span.at({c.group, count[c.group]++});
      out[r].push_back(std::max(0.0, end - start));
    }
    ++r;
  }
  return out;
}

std::vector<double> replay(const TraceJob& job, const std::function<double(int, size_t)>& seconds) {
  const size_t n = job.ranks.size();
  struct Slot {
    size_t issued = 0;
    double latest = 0, seconds = 0, end = NAN;
  };
  std::vector<std::vector<Slot>> slots(job.groups.size());  // [group][k]
  std::vector<double> stream_free(job.groups.size(), 0.0);
  std::vector<std::vector<size_t>> seq(n);                  // [rank][call] -> k within its group
  for (size_t r = 0; r < n; ++r) {
    std::vector<size_t> count(job.groups.size(), 0);
    for (const auto& c : job.ranks[r].calls) seq[r].push_back(count[c.group]++);
  }
  std::vector<size_t> pos(n, 0);
  std::vector<double> t(n, 0.0), last_end(n, 0.0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t r = 0; r < n; ++r) {
      const auto& items = job.ranks[r].items;
      while (pos[r] < items.size()) {
        const TraceItem& it = items[pos[r]];
        if (it.type == TraceItem::Type::Compute) {
          t[r] += it.seconds;
        } else {
          const TraceCall& c = job.ranks[r].calls[it.call];
          auto& gs = slots[c.group];
          const size_t k = seq[r][it.call];
          if (gs.size() <= k) gs.resize(k + 1);
          Slot& s = gs[k];
          if (it.type == TraceItem::Type::Issue) {
            s.issued++;
            s.latest = std::max(s.latest, t[r]);
            s.seconds = std::max(s.seconds, seconds(static_cast<int>(r), it.call));
            if (s.issued == job.groups[c.group].ranks.size()) {
              const double start = std::max(s.latest, stream_free[c.group]);
              s.end = start + s.seconds;
              stream_free[c.group] = s.end;
            }
          } else {
            if (std::isnan(s.end)) break;  // blocked until the others issue it
            t[r] = std::max(t[r], s.end);
          }
        }
        ++pos[r];
        progress = true;
      }
    }
  }
  std::vector<double> out(n);
  for (size_t r = 0; r < n; ++r) {
    if (pos[r] < job.ranks[r].items.size())
      fail(job.ranks[r].file, "replay: rank " + std::to_string(job.ranks[r].rank) +
                                  " waits for a call the other members of its group never make");
    double end = t[r];
    for (size_t c = 0; c < job.ranks[r].calls.size(); ++c) {
      const auto& call = job.ranks[r].calls[c];
      const double e = slots[call.group][seq[r][c]].end;
      if (std::isnan(e))
        fail(job.ranks[r].file, "replay: " + call.name + " (call " + std::to_string(c) +
                                    ") is never made by every member of its group");
      end = std::max(end, e);
    }
    out[r] = end;
  }
  return out;
}

}  // namespace compcoll::workload

// real/mpi_baseline.cpp — MPI's own collectives as the baseline (baseline.h).
#include <cstring>
#include <memory>

#include "codec/reduce.h"
#include "real/transport.h"
#include "real/baseline.h"
#include "real/verify.h"
#include "schedule/algorithms.h"

namespace compcoll::real {

namespace {

void add_bf16(void* in, void* inout, int* len, MPI_Datatype*) { reduce_add(DType::BF16, inout, in, static_cast<uint64_t>(*len)); }
void add_fp16(void* in, void* inout, int* len, MPI_Datatype*) { reduce_add(DType::FP16, inout, in, static_cast<uint64_t>(*len)); }

class MpiBaseline final : public Baseline {
 public:
  MpiBaseline(MPI_Comm comm, const sched::Schedule& s)
      : coll_(s.collective),
        dtype_(s.dtype),
        count_(s.collective == sched::Collective::AllToAll ? alltoall_count(s) : s.count) {
    mpi_check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &n_);
    for (int r = 0; r < n_; ++r)
      if (s.collective == sched::Collective::Broadcast && s.ranks[r].input_count) root_ = r;
    if (dtype_ == DType::FP32) {
      type_ = MPI_FLOAT;
      op_ = MPI_SUM;
    } else {
      type_ = MPI_UINT16_T;
      mpi_check(MPI_Op_create(dtype_ == DType::BF16 ? add_bf16 : add_fp16, 1, &op_), "MPI_Op_create");
      own_op_ = true;
    }
    for (int r = 0; r < n_; ++r) {
      const sched::Block b = sched::block_of(count_, n_, r);
      counts_.push_back(static_cast<int>(b.count()));
      displs_.push_back(static_cast<int>(b.begin));
    }
  }
  ~MpiBaseline() override {
    if (own_op_) MPI_Op_free(&op_);
    MPI_Comm_free(&comm_);
  }
  std::string name() const override {
    switch (coll_) {
      case sched::Collective::AllReduce: return "MPI_Allreduce";
      case sched::Collective::ReduceScatter: return "MPI_Reduce_scatter";
      case sched::Collective::AllGather: return "MPI_Allgatherv";
      case sched::Collective::Broadcast: return "MPI_Bcast";
      case sched::Collective::AllToAll: return "MPI_Alltoall";
    }
    return "?";
  }
  void run(const void* in, void* out) override {
    const int c = static_cast<int>(count_);
    switch (coll_) {
      case sched::Collective::AllReduce:
        mpi_check(MPI_Allreduce(in, out, c, type_, op_, comm_), "MPI_Allreduce");
        return;
      case sched::Collective::ReduceScatter:
        mpi_check(MPI_Reduce_scatter(in, out, counts_.data(), type_, op_, comm_), "MPI_Reduce_scatter");
        return;
      case sched::Collective::AllGather:
        mpi_check(MPI_Allgatherv(in, counts_[rank_], type_, out, counts_.data(), displs_.data(), type_, comm_),
                  "MPI_Allgatherv");
        return;
      case sched::Collective::Broadcast:
        if (rank_ == root_) std::memcpy(out, in, count_ * dtype_size(dtype_));
        mpi_check(MPI_Bcast(out, c, type_, root_, comm_), "MPI_Bcast");
        return;
      case sched::Collective::AllToAll:
        mpi_check(MPI_Alltoall(in, c, type_, out, c, type_, comm_), "MPI_Alltoall");
        return;
    }
  }

 private:
  sched::Collective coll_;
  DType dtype_;
  uint64_t count_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, n_ = 1, root_ = 0;
  MPI_Datatype type_;
  MPI_Op op_;
  bool own_op_ = false;
  std::vector<int> counts_, displs_;
};

}  // namespace

std::unique_ptr<Baseline> make_mpi_baseline(MPI_Comm comm, const sched::Schedule& s) {
  if (s.count > static_cast<uint64_t>(INT32_MAX))
    throw TransportError(std::to_string(s.count) + " elements exceed MPI's int count");
  return std::make_unique<MpiBaseline>(comm, s);
}

}  // namespace compcoll::real

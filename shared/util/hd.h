// shared/util/hd.h — the macros of code shared by host code and CUDA kernels: COMPCOLL_HD marks
// its functions, COMPCOLL_UNROLL asks nvcc to unroll a loop of a constant trip count (so that
// a small array indexed by it stays in registers) and is nothing on the host.
#pragma once

#ifndef COMPCOLL_HD
#if defined(__CUDACC__)
#define COMPCOLL_HD __host__ __device__
#else
#define COMPCOLL_HD
#endif
#endif

#ifndef COMPCOLL_UNROLL
#if defined(__CUDA_ARCH__)
#define COMPCOLL_UNROLL _Pragma("unroll")
#else
#define COMPCOLL_UNROLL
#endif
#endif

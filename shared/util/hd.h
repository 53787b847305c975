// shared/util/hd.h — the one macro that marks functions shared by host code and CUDA kernels.
#pragma once

#ifndef COMPCOLL_HD
#if defined(__CUDACC__)
#define COMPCOLL_HD __host__ __device__
#else
#define COMPCOLL_HD
#endif
#endif

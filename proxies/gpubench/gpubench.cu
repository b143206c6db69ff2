// gpubench: hpcval's own small CUDA proxy for the GPU figures no community
// package gives in one place: host<->device copies on pinned memory, GEMM
// throughput (cuBLAS), device-to-device copies between GPUs (peer access).
//
//   gpubench h2d  --device D [--bytes N] [--reps R]
//   gpubench d2h  --device D [--bytes N] [--reps R]
//   gpubench gemm --device D [--n N] [--reps R] [--precision double|single]
//   gpubench p2p  --device D --peer P [--bytes N] [--reps R]
//   gpubench info --device D
//
// Each timed repetition prints one line (the samples a check judges):
//
//   hpcval-gpubench mode=h2d device=0 peer=-1 size=268435456 rep=1 value=24.5 unit=GB/s
//
// and the run ends with "hpcval-gpubench done mode=h2d". `info` prints
// "hpcval-gpubench info device=0 name=... memory_bytes=N l2_bytes=N cc=9.0".
// Copies are timed with CUDA events around one cudaMemcpyAsync of N bytes
// (GB/s = 10^9 bytes/s); GEMM with events around one cublas?gemm of N x N
// matrices (TFLOP/s = 2 N^3 / t / 10^12). A warm-up repetition is not printed.
// Errors print "hpcval-gpubench error: WHAT: CUDA MESSAGE" and exit 1.
//
// Build: make (nvcc -O2 -std=c++17 -o gpubench gpubench.cu -lcublas), or Spack's
// hpcval-gpubench package (spack-repo/).
// This file is hpcval's own code (no third-party source).

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void check(cudaError_t err, const char *what) {
  if (err != cudaSuccess) {
    std::printf("hpcval-gpubench error: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

void check_blas(cublasStatus_t st, const char *what) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::printf("hpcval-gpubench error: %s: cuBLAS status %d\n", what, static_cast<int>(st));
    std::exit(1);
  }
}

struct Options {
  std::string mode;
  int device = 0;
  int peer = -1;
  size_t bytes = size_t(256) << 20;
  int n = 8192;
  int reps = 20;
  bool single = false;
};

[[noreturn]] void usage(const char *why) {
  std::printf("hpcval-gpubench error: %s\n"
              "usage: gpubench h2d|d2h|gemm|p2p|info --device D [--peer P] [--bytes N] "
              "[--n N] [--reps R] [--precision double|single]\n", why);
  std::exit(2);
}

long long number(const char *text, const char *name) {
  char *end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < 0) usage(name);
  return v;
}

Options parse(int argc, char **argv) {
  if (argc < 2) usage("no mode");
  Options o;
  o.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage("option without a value");
    const char *v = argv[++i];
    if (a == "--device") o.device = static_cast<int>(number(v, "--device"));
    else if (a == "--peer") o.peer = static_cast<int>(number(v, "--peer"));
    else if (a == "--bytes") o.bytes = static_cast<size_t>(number(v, "--bytes"));
    else if (a == "--n") o.n = static_cast<int>(number(v, "--n"));
    else if (a == "--reps") o.reps = static_cast<int>(number(v, "--reps"));
    else if (a == "--precision") {
      if (std::string(v) != "single" && std::string(v) != "double") usage("--precision double|single");
      o.single = std::string(v) == "single";
    }
    else usage("unknown option");
  }
  if (o.reps < 1 || o.bytes == 0 || o.n < 1) usage("--reps, --bytes and --n must be positive");
  return o;
}

void print(const Options &o, size_t size, int rep, double value, const char *unit) {
  std::printf("hpcval-gpubench mode=%s device=%d peer=%d size=%zu rep=%d value=%.6g unit=%s\n",
              o.mode.c_str(), o.device, o.peer, size, rep, value, unit);
}

float time_events(cudaEvent_t start, cudaEvent_t stop) {
  float ms = 0.0f;
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  return ms;
}

void copies(const Options &o) {
  void *host = nullptr, *dev = nullptr, *peer = nullptr;
  check(cudaMallocHost(&host, o.bytes), "cudaMallocHost (pinned)");
  std::memset(host, 1, o.bytes);
  check(cudaMalloc(&dev, o.bytes), "cudaMalloc");
  if (o.mode == "p2p") {
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, o.device, o.peer), "cudaDeviceCanAccessPeer");
    if (can) check(cudaDeviceEnablePeerAccess(o.peer, 0), "cudaDeviceEnablePeerAccess");
    check(cudaSetDevice(o.peer), "cudaSetDevice (peer)");
    check(cudaMalloc(&peer, o.bytes), "cudaMalloc (peer)");
    check(cudaSetDevice(o.device), "cudaSetDevice");
  }
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int rep = 0; rep <= o.reps; ++rep) {
    check(cudaEventRecord(start), "cudaEventRecord");
    if (o.mode == "h2d") check(cudaMemcpyAsync(dev, host, o.bytes, cudaMemcpyHostToDevice), "h2d");
    else if (o.mode == "d2h") check(cudaMemcpyAsync(host, dev, o.bytes, cudaMemcpyDeviceToHost), "d2h");
    else check(cudaMemcpyPeerAsync(peer, o.peer, dev, o.device, o.bytes), "cudaMemcpyPeerAsync");
    check(cudaEventRecord(stop), "cudaEventRecord");
    float ms = time_events(start, stop);
    if (rep > 0) print(o, o.bytes, rep, double(o.bytes) / (ms * 1e-3) / 1e9, "GB/s");
  }
  cudaFreeHost(host);
  cudaFree(dev);
  if (peer) cudaFree(peer);
}

// Pseudo-random operands in [-1, 1): a GEMM of zeros draws less power and
// would hide a power cap that slows a GEMM of real data.
template <typename T>
__global__ void fill(T *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ seed;
    x ^= x >> 16; x *= 2246822519u; x ^= x >> 13;
    p[i] = T(x) / T(2147483648.0) - T(1);
  }
}

template <typename T>
void gemm(const Options &o) {
  size_t elems = size_t(o.n) * size_t(o.n);
  T *a, *b, *c;
  check(cudaMalloc(&a, elems * sizeof(T)), "cudaMalloc A");
  check(cudaMalloc(&b, elems * sizeof(T)), "cudaMalloc B");
  check(cudaMalloc(&c, elems * sizeof(T)), "cudaMalloc C");
  fill<T><<<1024, 256>>>(a, elems, 1u);
  fill<T><<<1024, 256>>>(b, elems, 2u);
  check(cudaGetLastError(), "fill kernel");
  check(cudaDeviceSynchronize(), "fill kernel");
  cublasHandle_t h;
  check_blas(cublasCreate(&h), "cublasCreate");
  const T one = 1, zero = 0;
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int rep = 0; rep <= o.reps; ++rep) {
    check(cudaEventRecord(start), "cudaEventRecord");
    if constexpr (sizeof(T) == 8)
      check_blas(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, o.n, o.n, o.n, &one, a, o.n, b, o.n,
                             &zero, c, o.n), "cublasDgemm");
    else
      check_blas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, o.n, o.n, o.n, &one, a, o.n, b, o.n,
                             &zero, c, o.n), "cublasSgemm");
    check(cudaEventRecord(stop), "cudaEventRecord");
    float ms = time_events(start, stop);
    double flop = 2.0 * double(o.n) * double(o.n) * double(o.n);
    if (rep > 0) print(o, size_t(o.n), rep, flop / (ms * 1e-3) / 1e12, "TFLOP/s");
  }
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

void info(const Options &o) {
  cudaDeviceProp p;
  check(cudaGetDeviceProperties(&p, o.device), "cudaGetDeviceProperties");
  std::string name = p.name;
  for (char &ch : name) if (ch == ' ') ch = '_';
  std::printf("hpcval-gpubench info device=%d name=%s memory_bytes=%zu l2_bytes=%d cc=%d.%d\n",
              o.device, name.c_str(), p.totalGlobalMem, p.l2CacheSize, p.major, p.minor);
}

}  // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (o.device >= count) usage("--device beyond the visible GPUs");
  if (o.mode == "p2p" && (o.peer < 0 || o.peer >= count || o.peer == o.device))
    usage("p2p needs --peer, another visible GPU");
  check(cudaSetDevice(o.device), "cudaSetDevice");
  if (o.mode == "h2d" || o.mode == "d2h" || o.mode == "p2p") copies(o);
  else if (o.mode == "gemm") o.single ? gemm<float>(o) : gemm<double>(o);
  else if (o.mode == "info") { info(o); return 0; }
  else usage("unknown mode");
  std::printf("hpcval-gpubench done mode=%s\n", o.mode.c_str());
  return 0;
}

// The fiber scheduler and the host stubs behind emu.h (see there).
#include "emu.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

namespace emu {

Thread* g_thread = nullptr;
uint3 g_block_idx;
dim3 g_block_dim, g_grid_dim;

namespace {

constexpr size_t kStack = 512 * 1024;

struct Fiber {
  Thread t;
  ucontext_t ctx;
  char* stack = nullptr;
  bool done = false;
  bool progressed = false;
  const char* waiting = nullptr;  // where it waits, for the deadlock report
  void* fake_stack = nullptr;
};

struct Barrier {
  int members = 0;
  int arrived = 0;
  unsigned gen = 0;
};

struct Warp {
  Barrier bar;
  unsigned full_mask = 0;
  uint64_t slot[32];
};

ucontext_t g_sched;
const void* g_sched_stack = nullptr;
size_t g_sched_stack_size = 0;
std::vector<Fiber> g_fibers;
Fiber* g_cur = nullptr;
Barrier g_block_bar;
std::vector<Warp> g_warps;
const std::function<void()>* g_body = nullptr;
cudaError_t g_last_error = cudaSuccess;

void to_scheduler(bool finished) {
  Fiber* f = g_cur;
#if EMU_ASAN
  __sanitizer_start_switch_fiber(finished ? nullptr : &f->fake_stack, g_sched_stack,
                                 g_sched_stack_size);
#endif
  swapcontext(&f->ctx, &g_sched);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &g_sched_stack, &g_sched_stack_size);
#endif
  (void)finished;
}

void fiber_main() {
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g_sched_stack, &g_sched_stack_size);
#endif
  (*g_body)();
  g_cur->done = true;
  to_scheduler(true);
  fail("a finished fiber was resumed");
}

void wait_at(Barrier& b, const char* where) {
  const unsigned gen = b.gen;
  g_cur->progressed = true;
  if (++b.arrived == b.members) {
    b.arrived = 0;
    ++b.gen;
  }
  // Always hand over: the scheduler's order, not arrival, decides who starts the next phase.
  g_cur->waiting = where;
  to_scheduler(false);
  while (b.gen == gen) to_scheduler(false);
  g_cur->waiting = nullptr;
  g_cur->progressed = true;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::vector<int> pass_order(int n, std::mt19937& rng) {
  static const std::string mode = std::getenv("EMU_ORDER") ? std::getenv("EMU_ORDER") : "forward";
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  if (mode == "reverse") std::reverse(order.begin(), order.end());
  else if (mode == "random") std::shuffle(order.begin(), order.end(), rng);
  return order;
}

void run_block(int nthreads, std::mt19937& rng) {
  for (int i = 0; i < nthreads; ++i) {
    Fiber& f = g_fibers[i];
    f.t.linear = i;
    f.t.idx.x = unsigned(i % g_block_dim.x);
    f.t.idx.y = unsigned((i / g_block_dim.x) % g_block_dim.y);
    f.t.idx.z = unsigned(i / (g_block_dim.x * g_block_dim.y));
    f.done = false;
    f.waiting = nullptr;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
  }
  g_block_bar = Barrier{nthreads, 0, 0};
  const int nwarps = (nthreads + 31) / 32;
  g_warps.assign(nwarps, Warp{});
  for (int w = 0; w < nwarps; ++w) {
    const int members = std::min(32, nthreads - 32 * w);
    g_warps[w].bar = Barrier{members, 0, 0};
    g_warps[w].full_mask = members == 32 ? 0xffffffffu : ((1u << members) - 1);
  }
  int live = nthreads;
  while (live > 0) {
    bool progress = false;
    for (int i : pass_order(nthreads, rng)) {
      Fiber& f = g_fibers[i];
      if (f.done) continue;
      f.progressed = false;
      g_cur = &f;
      g_thread = &f.t;
#if EMU_ASAN
      void* fake = nullptr;
      __sanitizer_start_switch_fiber(&fake, f.stack, kStack);
#endif
      swapcontext(&g_sched, &f.ctx);
#if EMU_ASAN
      __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
      if (f.done) {
        --live;
        progress = true;
      } else if (f.progressed) {
        progress = true;
      }
    }
    if (!progress) {
      std::string msg = "deadlock in block (" + std::to_string(g_block_idx.x) + "," +
                        std::to_string(g_block_idx.y) + "," + std::to_string(g_block_idx.z) +
                        "):";
      for (int i = 0; i < nthreads; ++i) {
        const Fiber& f = g_fibers[i];
        msg += " t" + std::to_string(i) + "=" + (f.done ? "exited" : f.waiting ? f.waiting : "?");
        if (msg.size() > 2000) break;
      }
      fail(msg.c_str());
    }
  }
}

}  // namespace

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "emu: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

void syncthreads() { wait_at(g_block_bar, "__syncthreads"); }

void syncwarp(unsigned mask) {
  Warp& w = g_warps[g_cur->t.linear / 32];
  if (mask != 0xffffffffu && mask != w.full_mask) fail("__syncwarp with a partial mask");
  if (mask == 0xffffffffu && w.full_mask != 0xffffffffu) fail("__syncwarp(full mask) in a partial warp");
  wait_at(w.bar, "__syncwarp");
}

uint64_t shfl_bits(unsigned mask, uint64_t bits, int arg, int width, int mode) {
  Warp& w = g_warps[g_cur->t.linear / 32];
  if (mask != w.full_mask) fail("shuffle whose mask is not exactly the warp's threads");
  if (width <= 0 || width > 32 || (width & (width - 1))) fail("shuffle width not a power of 2 <= 32");
  const int lane = g_cur->t.linear % 32;
  w.slot[lane] = bits;
  wait_at(w.bar, "shuffle (write)");
  const int base = lane & ~(width - 1);
  int src = lane;
  switch (mode) {
    case kShflXor:
      src = lane ^ arg;
      if (src >= base + width) src = lane;  // outside the segment: own value
      break;
    case kShflDown:
      src = (lane - base) + arg < width ? lane + arg : lane;
      break;
    case kShflUp:
      src = (lane - base) - arg >= 0 ? lane - arg : lane;
      break;
    default:
      src = base + (arg % width);
  }
  if (src >= w.bar.members) fail("shuffle reads a lane that does not exist");
  const uint64_t r = w.slot[src];
  wait_at(w.bar, "shuffle (read)");
  return r;
}

void launch(dim3 grid, dim3 block, size_t shared_bytes, const char* kernel, const char* caller,
            const std::function<void()>& body) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (env_int("EMU_TRACE", 0))
    std::fprintf(stderr, "emu: %s grid (%u,%u,%u) block (%u,%u,%u) in %s\n", kernel, grid.x, grid.y,
                 grid.z, block.x, block.y, block.z, caller);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 ||
      block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x > 0x7fffffffu ||
      grid.y > 65535 || grid.z > 65535 || shared_bytes > 48 * 1024) {
    std::fprintf(stderr, "emu: invalid launch grid (%u,%u,%u) block (%u,%u,%u) shared %zu\n",
                 grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes);
    g_last_error = cudaErrorInvalidConfiguration;
    return;
  }
  if (g_fibers.size() < threads) {
    const size_t old = g_fibers.size();
    g_fibers.resize(threads);
    for (size_t i = old; i < threads; ++i) {
      void* p = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) fail("mmap of a fiber stack failed");
      g_fibers[i].stack = static_cast<char*>(p);
    }
  }
  static std::mt19937 rng(env_int("EMU_SEED", 1));
  g_grid_dim = grid;
  g_block_dim = block;
  g_body = &body;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        g_block_idx = uint3{x, y, z};
        run_block(int(threads), rng);
      }
  g_thread = nullptr;
}

}  // namespace emu

// ---- the CUDA runtime calls the host code makes -------------------------------------------

extern "C" {

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = emu::g_last_error;
  emu::g_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return emu::g_last_error; }
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = emu::env_int("EMU_SMS", 3);
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = 227 * 1024;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = 2048;
      return cudaSuccess;
    default:
      return cudaErrorInvalidValue;
  }
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int, size_t) {
  *blocks = emu::env_int("EMU_BLOCKS_PER_SM", 2);
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* f, int threads,
                                                                  size_t shared, unsigned int) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, threads, shared);
}
cudaError_t cudaFuncSetAttribute(const void*, enum cudaFuncAttribute, int) { return cudaSuccess; }

// The C shim's device queries (renamed in emu.h): every tensor is on "cuda:0"-like device -1.
int32_t emu_aoti_torch_get_device_type(void*, int32_t* type) {
  *type = 1;  // aoti_torch_device_type_cuda()
  return 0;
}
int32_t emu_aoti_torch_create_device_guard(int32_t, void** guard) {
  static int dummy;
  *guard = &dummy;
  return 0;
}
int32_t emu_aoti_torch_delete_device_guard(void*) { return 0; }
int32_t emu_aoti_torch_device_guard_set_index(void*, int32_t) { return 0; }
int32_t emu_aoti_torch_get_current_cuda_stream(int32_t, void** stream) {
  *stream = nullptr;
  return 0;
}
int32_t emu_torch_c10_cuda_check_msg(int32_t err, const char* file, const char* func, uint32_t line,
                                     bool, char** msg) {
  *msg = nullptr;
  if (err == 0) return 0;
  const std::string s = std::string("CUDA error (emulated) ") + std::to_string(err) + " at " +
                        file + ":" + std::to_string(line) + " in " + func;
  *msg = strdup(s.c_str());
  return 0;
}
void emu_torch_c10_cuda_free_error_msg(char* msg) { std::free(msg); }

}  // extern "C"

// loomrun: starts the local ranks of a data-parallel job, as PyTorch's torchrun.
//
//   loomrun --nproc-per-node 2 build/cpu/examples/text_classification --distributed
//   loomrun --nnodes 2 --node-rank 0 --nproc-per-node 4 --master-addr 10.0.0.1 --master-port 29500 train ...
//   loomrun --standalone --nproc-per-node 3 program ...   # one node, a free port picked here
//
// Each of the --nproc-per-node processes runs `program args...` with the variables
// distributed::init_process_group reads: MASTER_ADDR, MASTER_PORT, WORLD_SIZE
// (nnodes × nproc-per-node), RANK (node_rank × nproc-per-node + local rank), LOCAL_RANK and
// LOCAL_WORLD_SIZE. Every rank runs in a process group of its own, so that stopping it stops
// what it started, and dies with loomrun (PR_SET_PDEATHSIG) if loomrun is killed outright.
//
// Note [stopping a job]
// A job stops as a whole. When a rank exits with a non-zero code or is killed by a signal,
// loomrun sends SIGTERM to every other rank, gives them --grace seconds, SIGKILLs what is
// left and exits with that first rank's code (128 + signal for a signal). SIGINT and
// SIGTERM sent to loomrun are forwarded to every rank, with the same grace period; loomrun
// then exits with 128 + that signal. When all ranks exit 0, so does loomrun.
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

struct Rank {
  int rank = 0, local_rank = 0;
  pid_t pid = -1;
  bool running = false;
};

// A port nobody listens on now (bound to port 0, read back, released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("loomrun: picking a free port");
    std::exit(1);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Exit code as a shell reports it: the code, or 128 + the signal.
int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
}

class Job {
 public:
  explicit Job(double grace_seconds) : grace_(grace_seconds) {
    // SIGINT, SIGTERM and SIGCHLD are taken with sigtimedwait, not by handlers; children
    // get the default dispositions back before exec.
    sigemptyset(&signals_);
    for (int s : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&signals_, s);
    sigprocmask(SIG_BLOCK, &signals_, &old_mask_);
  }

  void start(Rank r, const std::vector<std::string>& command, const std::vector<std::string>& env) {
    std::vector<char*> argv;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("loomrun: fork");
      stop_all(SIGTERM);
      std::exit(1);
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      // A rank never outlives loomrun, even when loomrun is SIGKILLed (a CI timeout).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
      for (const std::string& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "loomrun: rank %d: cannot run %s: %s\n", r.rank, argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here: no race with a signal sent before the child ran
    r.pid = pid;
    r.running = true;
    ranks_.push_back(r);
  }

  // Waits for the job; returns loomrun's exit code (Note [stopping a job]).
  int wait() {
    std::optional<int> result;
    while (running() > 0) {
      const timespec tick{0, 100'000'000};
      const int sig = sigtimedwait(&signals_, nullptr, &tick);
      if (sig == SIGINT || sig == SIGTERM) {
        std::fprintf(stderr, "loomrun: got %s, stopping the ranks\n", strsignal(sig));
        stop_all(sig);
        return 128 + sig;
      }
      int status = 0;
      pid_t pid;
      while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
        Rank* r = find(pid);
        if (!r) continue;
        r->running = false;
        if (exit_code(status) != 0 && !result) {
          std::fprintf(stderr, "loomrun: rank %d (local rank %d, pid %d) %s; stopping the others\n", r->rank,
                       r->local_rank, int(pid), describe(status).c_str());
          result = exit_code(status);
          stop_all(SIGTERM);
          return *result;
        }
      }
    }
    return 0;
  }

 private:
  size_t running() const {
    size_t n = 0;
    for (const Rank& r : ranks_) n += r.running;
    return n;
  }
  Rank* find(pid_t pid) {
    for (Rank& r : ranks_)
      if (r.pid == pid) return &r;
    return nullptr;
  }

  // Sends sig to every running rank's process group, waits up to the grace period for
  // them, then SIGKILLs the rest (and their groups) and reaps them.
  void stop_all(int sig) {
    for (const Rank& r : ranks_)
      if (r.running) ::kill(-r.pid, sig);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_);
    while (running() > 0 && std::chrono::steady_clock::now() < deadline) {
      reap();
      ::usleep(20'000);
    }
    for (const Rank& r : ranks_)
      if (r.running) {
        std::fprintf(stderr, "loomrun: rank %d did not stop within %.1f s: SIGKILL\n", r.rank, grace_);
        ::kill(-r.pid, SIGKILL);
      }
    while (running() > 0) {
      reap();
      ::usleep(5'000);
    }
  }
  void reap() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0)
      if (Rank* r = find(pid)) r->running = false;
  }

  double grace_;
  sigset_t signals_{}, old_mask_{};
  std::vector<Rank> ranks_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Start the local ranks of a data-parallel job (as torchrun)"};
  int nproc = 1, nnodes = 1, node_rank = 0, master_port = 29500;
  std::string master_addr = "127.0.0.1";
  bool standalone = false;
  double grace = 5.0;
  std::vector<std::string> command;
  app.add_option("--nproc-per-node", nproc, "processes on this node")->check(CLI::PositiveNumber);
  app.add_option("--nnodes", nnodes, "nodes in the job")->check(CLI::PositiveNumber);
  app.add_option("--node-rank", node_rank, "this node's index in [0, nnodes)")->check(CLI::NonNegativeNumber);
  app.add_option("--master-addr", master_addr, "address of rank 0's node");
  app.add_option("--master-port", master_port, "port of the rendezvous store on rank 0")->check(CLI::Range(1, 65535));
  app.add_flag("--standalone", standalone, "one node: pick a free local port for the rendezvous");
  app.add_option("--grace", grace, "seconds ranks get to stop after SIGTERM before SIGKILL")
      ->check(CLI::NonNegativeNumber);
  app.prefix_command();  // everything from the first non-option on: the program and its arguments
  app.footer("  loomrun [options] program [args...]");
  CLI11_PARSE(app, argc, argv);
  command = app.remaining();
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) {
    std::fprintf(stderr, "loomrun: no program given (loomrun [options] program [args...]; --help)\n");
    return 2;
  }
  if (node_rank >= nnodes) {
    std::fprintf(stderr, "loomrun: --node-rank %d must be below --nnodes %d\n", node_rank, nnodes);
    return 2;
  }
  if (standalone && nnodes != 1) {
    std::fprintf(stderr, "loomrun: --standalone is for one node, got --nnodes %d\n", nnodes);
    return 2;
  }
  if (standalone) {
    master_addr = "127.0.0.1";
    master_port = free_port();
  }

  Job job(grace);
  for (int local = 0; local < nproc; ++local) {
    const int rank = node_rank * nproc + local;
    job.start({rank, local},
              command,
              {"MASTER_ADDR=" + master_addr, "MASTER_PORT=" + std::to_string(master_port),
               "WORLD_SIZE=" + std::to_string(nnodes * nproc), "RANK=" + std::to_string(rank),
               "LOCAL_RANK=" + std::to_string(local), "LOCAL_WORLD_SIZE=" + std::to_string(nproc)});
  }
  return job.wait();
}

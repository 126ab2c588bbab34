// The blocking TCP calls the store's client and server share: bounded connect, full sends and
// receives (a receive may carry a deadline), and a listening socket. Failures are returned
// (false, -1) with a reason, for the caller to put into its own DistributedError.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace loom::distributed::net {

using Clock = std::chrono::steady_clock;

std::string errno_text();
// Milliseconds left until deadline (0 when past), clamped to an int for poll().
int remaining_ms(Clock::time_point deadline);
// Waits until fd is ready for events; false when the deadline passed first.
bool wait_ready(int fd, short events, Clock::time_point deadline);

// false on EOF, error, or (with a deadline) timeout.
bool send_all(int fd, const void* data, size_t n);
bool recv_all(int fd, void* data, size_t n, const Clock::time_point* deadline = nullptr);

// One connection attempt to host:port, the connect bounded by the deadline (a host that
// drops SYNs would otherwise block for minutes), TCP_NODELAY set. The socket or -1 and why.
int try_connect(const std::string& host, int port, Clock::time_point deadline, std::string& why);

// A socket listening on port (0: any free port) on every address, IPv6 and IPv4 where the
// machine has IPv6; sets port to the one bound. -1 and why on failure.
int listen_on(int& port, std::string& why);

}  // namespace loom::distributed::net

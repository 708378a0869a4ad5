// The TCP rendezvous: rank 0 listens, every other rank connects (retrying while rank 0 is not up
// yet) and says who it is; once all have arrived rank 0 answers each with the blob, or with the
// reason it gives up. The file rendezvous: rank 0 writes the blob atomically, rank r reads it and
// acknowledges in "<path>.<r>" with the blob's hash (so an acknowledgement of an older job's file
// never counts), and rank 0 waits for all acknowledgements.
#include "distributed/rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

namespace minidl::distributed {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr uint32_t kMagic = 0x6d646c72;  // "mdlr"
constexpr uint32_t kVersion = 1;

double seconds(milliseconds t) { return static_cast<double>(t.count()) / 1000.0; }

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(std::min<int64_t>(left, 1 << 30)) : 0;
}

// A socket that closes itself.
struct Socket {
  int fd = -1;
  explicit Socket(int f = -1) : fd(f) {}
  Socket(Socket&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

// Sends or receives exactly `n` bytes before `deadline`; false on timeout or a closed connection.
bool send_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    pollfd pfd{fd, POLLOUT, 0};
    if (::poll(&pfd, 1, remaining_ms(deadline)) <= 0) return false;
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (sent <= 0) return false;
    p += sent, n -= static_cast<size_t>(sent);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, remaining_ms(deadline)) <= 0) return false;
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return false;
    p += got, n -= static_cast<size_t>(got);
  }
  return true;
}

// A reply: status 0 and the blob, or status 1 and why rank 0 gave up.
bool send_reply(int fd, uint32_t status, const std::string& text, Clock::time_point deadline) {
  const uint32_t head[2] = {status, static_cast<uint32_t>(text.size())};
  return send_all(fd, head, sizeof(head), deadline) && send_all(fd, text.data(), text.size(), deadline);
}

std::string missing_ranks(const std::vector<bool>& arrived) {
  std::ostringstream out;
  int count = 0;
  for (size_t r = 0; r < arrived.size(); ++r)
    if (!arrived[r]) out << (count++ ? ", " : "") << r;
  return out.str();
}

std::string tcp_rank0(const Rendezvous& where, int world_size, const std::string& blob, milliseconds timeout,
                      std::vector<Link>* links) {
  const Clock::time_point deadline = Clock::now() + timeout;
  Socket listener(::socket(AF_INET6, SOCK_STREAM, 0));
  const bool ipv6 = listener.fd >= 0;
  if (!ipv6) listener = Socket(::socket(AF_INET, SOCK_STREAM, 0));
  MINIDL_CHECK(listener.fd >= 0, "rendezvous: cannot open a socket: ", std::strerror(errno));
  int on = 1, off = 0;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  int bound = -1;
  if (ipv6) {  // both IPv6 and IPv4 clients
    ::setsockopt(listener.fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(where.port));
    bound = ::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(where.port));
    bound = ::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  MINIDL_CHECK(bound == 0, "rendezvous: rank 0 cannot listen on port ", where.port, ": ", std::strerror(errno),
               " (another job on this port? set MASTER_PORT to a free one)");
  MINIDL_CHECK(::listen(listener.fd, 128) == 0, "rendezvous: listen on port ", where.port, ": ", std::strerror(errno));

  std::vector<bool> arrived(static_cast<size_t>(world_size), false);
  arrived[0] = true;
  std::vector<Socket> peers;
  std::vector<int> peer_ranks;
  std::string failure;
  int waiting = world_size - 1;
  while (waiting > 0 && failure.empty()) {
    pollfd pfd{listener.fd, POLLIN, 0};
    if (::poll(&pfd, 1, remaining_ms(deadline)) <= 0) {
      std::ostringstream why;
      why << "rendezvous at " << where.describe() << ": rank(s) " << missing_ranks(arrived) << " of " << world_size
          << " did not arrive within " << seconds(timeout) << " s (not started, crashed, or given another "
          << "MASTER_ADDR:MASTER_PORT or WORLD_SIZE)";
      failure = why.str();
      break;
    }
    Socket peer(::accept(listener.fd, nullptr, nullptr));
    if (peer.fd < 0) continue;
    uint32_t hello[4];
    if (!recv_all(peer.fd, hello, sizeof(hello), std::min(deadline, Clock::now() + std::chrono::seconds(10))))
      continue;  // not one of ours, or gone already
    std::ostringstream why;
    if (hello[0] != kMagic || hello[1] != kVersion) {
      continue;  // a stray connection: not a minidl rank
    } else if (static_cast<int>(hello[3]) != world_size) {
      why << "rendezvous at " << where.describe() << ": rank " << hello[2] << " was started with WORLD_SIZE "
          << hello[3] << ", rank 0 with " << world_size << "; every rank must be given the same world size";
    } else if (hello[2] == 0 || static_cast<int>(hello[2]) >= world_size) {
      why << "rendezvous at " << where.describe() << ": a process claims rank " << hello[2]
          << ", but ranks run from 0 to " << world_size - 1 << " and rank 0 is this process";
    } else if (arrived[hello[2]]) {
      why << "rendezvous at " << where.describe() << ": two processes claim rank " << hello[2]
          << "; every process needs a RANK of its own";
    }
    if (!why.str().empty()) {
      failure = why.str();
      send_reply(peer.fd, 1, failure, Clock::now() + std::chrono::seconds(5));
      break;
    }
    arrived[hello[2]] = true;
    --waiting;
    peers.push_back(std::move(peer));
    peer_ranks.push_back(static_cast<int>(hello[2]));
  }
  for (Socket& peer : peers)
    if (failure.empty() ? !send_reply(peer.fd, 0, blob, Clock::now() + std::chrono::seconds(10))
                        : !send_reply(peer.fd, 1, failure, Clock::now() + std::chrono::seconds(5))) {
      if (failure.empty()) failure = "rendezvous at " + where.describe() + ": a rank left before rank 0 answered it";
    }
  if (!failure.empty()) MINIDL_FAIL(failure);
  if (links)
    for (size_t i = 0; i < peers.size(); ++i) links->push_back({peer_ranks[i], peers[i].release()});
  return blob;
}

std::string tcp_rank(const Rendezvous& where, int rank, int world_size, milliseconds timeout, std::vector<Link>* links) {
  const Clock::time_point deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string port = std::to_string(where.port);
  std::string last_error = "no answer";
  while (Clock::now() < deadline) {  // rank 0 may not be listening yet: retry until it is
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(where.host.c_str(), port.c_str(), &hints, &found);
    if (rc != 0) {
      last_error = std::string("cannot resolve '") + where.host + "': " + ::gai_strerror(rc);
      std::this_thread::sleep_for(milliseconds(200));
      continue;
    }
    for (addrinfo* a = found; a; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (s.fd < 0) continue;
      if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
        last_error = std::strerror(errno);
        continue;
      }
      ::freeaddrinfo(found);
      found = nullptr;
      const uint32_t hello[4] = {kMagic, kVersion, static_cast<uint32_t>(rank), static_cast<uint32_t>(world_size)};
      MINIDL_CHECK(send_all(s.fd, hello, sizeof(hello), deadline), "rendezvous at ", where.describe(), ": rank ",
                   rank, " reached rank 0 but could not say who it is");
      uint32_t head[2];
      MINIDL_CHECK(recv_all(s.fd, head, sizeof(head), deadline), "rendezvous at ", where.describe(), ": rank ", rank,
                   " reached rank 0, which did not answer within ", seconds(timeout),
                   " s (it answers once all ", world_size, " ranks have arrived; some did not, or rank 0 died)");
      std::string text(head[1], '\0');
      MINIDL_CHECK(recv_all(s.fd, text.data(), text.size(), deadline), "rendezvous at ", where.describe(),
                   ": rank 0's answer was cut short");
      if (head[0] != 0) MINIDL_FAIL("rank ", rank, ": ", text);
      if (links) links->push_back({0, s.release()});
      return text;
    }
    if (found) ::freeaddrinfo(found);
    std::this_thread::sleep_for(milliseconds(100));
  }
  MINIDL_FAIL("rendezvous at ", where.describe(), ": rank ", rank, " could not reach rank 0 within ", seconds(timeout),
              " s (", last_error, "); is rank 0 running, and are MASTER_ADDR and MASTER_PORT right?");
}

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream all;
  all << in.rdbuf();
  out = all.str();
  return true;
}

std::string file_header(int world_size, const std::string& blob) {
  return "minidl-rendezvous 1 world " + std::to_string(world_size) + " bytes " + std::to_string(blob.size()) + "\n";
}

std::string file_rank0(const Rendezvous& where, int world_size, const std::string& blob, milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const std::string header = file_header(world_size, blob);
  write_file_atomically(where.path, {header, blob});
  const std::string ack = std::to_string(fnv1a(blob));
  std::vector<bool> arrived(static_cast<size_t>(world_size), false);
  arrived[0] = true;
  int waiting = world_size - 1;
  while (waiting > 0) {
    for (int r = 1; r < world_size; ++r) {
      std::string text;
      if (!arrived[r] && read_file(where.path + "." + std::to_string(r), text) && text == ack) {
        arrived[r] = true;
        --waiting;
      }
    }
    if (waiting == 0) break;
    MINIDL_CHECK(Clock::now() < deadline, "rendezvous at ", where.describe(), ": rank(s) ", missing_ranks(arrived),
                 " of ", world_size, " did not arrive within ", seconds(timeout),
                 " s (not started, crashed, or given another file or WORLD_SIZE)");
    std::this_thread::sleep_for(milliseconds(50));
  }
  // Every rank has read the file: remove it and the acknowledgements, so that a later job given the
  // same path never reads this one's blob.
  std::remove(where.path.c_str());
  for (int r = 1; r < world_size; ++r) std::remove((where.path + "." + std::to_string(r)).c_str());
  return blob;
}

std::string file_rank(const Rendezvous& where, int rank, int world_size, milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string text;
  while (!read_file(where.path, text)) {
    MINIDL_CHECK(Clock::now() < deadline, "rendezvous at ", where.describe(), ": rank ", rank,
                 " found no file from rank 0 within ", seconds(timeout), " s; is rank 0 running with the same file?");
    std::this_thread::sleep_for(milliseconds(50));
  }
  const size_t eol = text.find('\n');
  std::istringstream head(text.substr(0, eol == std::string::npos ? 0 : eol));
  std::string magic, world_word, bytes_word;
  int version = 0, world = 0;
  size_t bytes = 0;
  head >> magic >> version >> world_word >> world >> bytes_word >> bytes;
  MINIDL_CHECK(magic == "minidl-rendezvous" && version == 1 && eol != std::string::npos &&
                   text.size() == eol + 1 + bytes,
               "rendezvous at ", where.describe(), ": the file is not a minidl rendezvous file (or is damaged)");
  MINIDL_CHECK(world == world_size, "rendezvous at ", where.describe(), ": rank ", rank, " was started with WORLD_SIZE ",
               world_size, ", rank 0 with ", world, "; every rank must be given the same world size");
  std::string blob = text.substr(eol + 1);
  write_file_atomically(where.path + "." + std::to_string(rank), {std::to_string(fnv1a(blob))});
  return blob;
}

}  // namespace

Rendezvous Rendezvous::tcp(std::string host, int port) {
  MINIDL_CHECK(!host.empty(), "Rendezvous::tcp: rank 0's host is empty");
  MINIDL_CHECK(port > 0 && port < 65536, "Rendezvous::tcp: the port must be in 1..65535, got ", port);
  Rendezvous r;
  r.kind = Kind::Tcp;
  r.host = std::move(host);
  r.port = port;
  return r;
}

Rendezvous Rendezvous::file(std::string path) {
  MINIDL_CHECK(!path.empty(), "Rendezvous::file: the path is empty");
  Rendezvous r;
  r.kind = Kind::File;
  r.path = std::move(path);
  return r;
}

Rendezvous Rendezvous::from_env() {
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  const char* file = std::getenv("MINIDL_INIT_FILE");
  if (addr && *addr) {
    MINIDL_CHECK(port && *port, "MASTER_ADDR is set (", addr, ") but MASTER_PORT is not; set both (scripts/launch.sh does)");
    char* end = nullptr;
    const long p = std::strtol(port, &end, 10);
    MINIDL_CHECK(end && *end == '\0' && p > 0 && p < 65536, "MASTER_PORT must be a port number in 1..65535, got '",
                 port, "'");
    return tcp(addr, static_cast<int>(p));
  }
  if (file && *file) return Rendezvous::file(file);
  MINIDL_FAIL("distributed: no rendezvous given; set MASTER_ADDR and MASTER_PORT (rank 0's host and a free port), "
              "or MINIDL_INIT_FILE (a file path every rank can see), or start the program with scripts/launch.sh");
}

std::string Rendezvous::describe() const {
  return kind == Kind::Tcp ? "tcp://" + host + ":" + std::to_string(port) : "file://" + path;
}

std::string rendezvous(const Rendezvous& where, int rank, int world_size, const std::string& blob,
                       milliseconds timeout, std::vector<Link>* links) {
  MINIDL_CHECK(world_size >= 1, "rendezvous: the world size must be at least 1, got ", world_size);
  MINIDL_CHECK(rank >= 0 && rank < world_size, "rendezvous: rank ", rank, " is outside 0..", world_size - 1,
               " for a world of ", world_size);
  if (world_size == 1) return blob;
  if (where.kind == Rendezvous::Kind::Tcp)
    return rank == 0 ? tcp_rank0(where, world_size, blob, timeout, links)
                     : tcp_rank(where, rank, world_size, timeout, links);
  return rank == 0 ? file_rank0(where, world_size, blob, timeout) : file_rank(where, rank, world_size, timeout);
}

}  // namespace minidl::distributed

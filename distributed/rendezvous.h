#pragma once
// How the processes of one job find each other before NCCL can connect them: rank 0 publishes a
// small blob (NCCL's unique id), every rank receives it, and rank 0 goes on only once all ranks have
// arrived. Two ways, as torchrun offers: a TCP rendezvous at rank 0's host and port (MASTER_ADDR,
// MASTER_PORT; works across machines) or a file every rank can see (a shared filesystem).
#include <chrono>
#include <string>
#include <vector>

namespace minidl::distributed {

/// Where the ranks meet.   Rendezvous::tcp("10.0.0.1", 29500), Rendezvous::file("/shared/job42.rdv")
struct Rendezvous {
  enum class Kind { Tcp, File };
  Kind kind = Kind::Tcp;
  std::string host;  // Tcp: rank 0's address (a name or an IP); rank 0 listens on every interface
  int port = 0;      // Tcp: rank 0's port
  std::string path;  // File: the file rank 0 writes (one per job; rank r acknowledges in "<path>.<r>")

  static Rendezvous tcp(std::string host, int port);
  static Rendezvous file(std::string path);
  /// What a launcher set: MASTER_ADDR and MASTER_PORT (TCP), else MINIDL_INIT_FILE (file).
  static Rendezvous from_env();
  /// "tcp://host:port" or "file://path".
  std::string describe() const;
};

/// An open connection to another rank, kept after a TCP rendezvous (rank 0 holds one to every rank,
/// every other rank one to rank 0), on which a process that dies shows up as a closed socket.
struct Link {
  int rank;
  int fd;
};

/// Meets the other ranks: returns rank 0's `blob` on every rank (the argument is ignored elsewhere).
/// Throws a clear error when a rank does not arrive within `timeout` (rank 0 names the missing
/// ranks), when ranks disagree on the world size, or when two processes claim the same rank.
/// With `links`, a TCP rendezvous leaves its connections open and hands them over (the caller closes
/// them); a file rendezvous has none.
///   std::string id = rendezvous(Rendezvous::from_env(), rank, world_size, rank == 0 ? make_id() : "", 60s);
std::string rendezvous(const Rendezvous& where, int rank, int world_size, const std::string& blob,
                       std::chrono::milliseconds timeout, std::vector<Link>* links = nullptr);

}  // namespace minidl::distributed

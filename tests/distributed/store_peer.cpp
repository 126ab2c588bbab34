// store_peer: Loom's side of the torch_store test (torch_store_test.py), which runs it beside
// a real PyTorch TCPStore, one side serving and the other a client:
//   store_peer serve [PREFIX]       serves a store on a free port, prints "port N"
//   store_peer join PORT [PREFIX]   a client of the store on 127.0.0.1:PORT
// Either way it then sets "loom" = "hello", reads "torch" (which PyTorch sets), adds 2 to
// "counter", checks both keys, sets "ready" and waits for "done"; every key under PREFIX. It prints what
// it read, one "name=value" a line, for the script to compare.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "distributed/error.h"
#include "distributed/tcp_store.h"

using loom::distributed::TCPStore;

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (!((mode == "serve" && argc <= 3) || (mode == "join" && (argc == 3 || argc == 4)))) {
    std::cerr << "usage: store_peer serve [PREFIX] | store_peer join PORT [PREFIX]\n";
    return 2;
  }
  bool serve = mode == "serve";
  std::string prefix = argc > (serve ? 2 : 3) ? argv[serve ? 2 : 3] : "";
  try {
    TCPStore store("127.0.0.1", serve ? 0 : std::stoi(argv[2]), serve, std::chrono::seconds(20), prefix);
    if (serve) std::cout << "port " << store.port() << std::endl;
    store.set("loom", {'h', 'e', 'l', 'l', 'o'});
    std::vector<char> torch = store.get("torch");
    std::cout << "torch=" << std::string(torch.begin(), torch.end()) << std::endl;
    std::cout << "counter=" << store.add("counter", 2) << std::endl;
    std::cout << "check=" << store.check({"loom", "torch"}) << std::endl;
    store.set("ready", {'1'});
    store.wait({"done"});
    std::cout << "done" << std::endl;
  } catch (const loom::distributed::DistributedError& e) {
    std::cerr << "store_peer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// Runs a TorchScript model saved from Python (torch.jit.script of a model
// with GritLinear layers, then torch.jit.save) on one input, without Python.
//
//   run_scripted MODEL.pt INPUT.pt [OUTPUT.pt]
//
// INPUT.pt is a tensor written by torch.save; OUTPUT.pt is the output written
// by torch::jit::pickle_save, which torch.load reads. The grit:: ops come from
// libgrit_ops, linked in (see CMakeLists.txt); the model's GritLinear layers
// are grit::packed_linear calls on their packed planes.
#include <torch/script.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

namespace {

std::vector<char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const char* path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error(std::string("cannot write ") + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: " << argv[0] << " MODEL.pt INPUT.pt [OUTPUT.pt]\n";
    return 2;
  }
  if (!c10::Dispatcher::singleton().findSchema({"grit::packed_linear", ""})) {
    std::cerr << "grit::packed_linear is not registered: libgrit_ops was not loaded (link it "
                 "with -Wl,--no-as-needed, or dlopen it before torch::jit::load)\n";
    return 1;
  }
  try {
    torch::jit::Module model = torch::jit::load(argv[1]);
    model.eval();
    const at::Tensor x = torch::jit::pickle_load(read_file(argv[2])).toTensor();
    torch::NoGradGuard no_grad;
    const auto t0 = std::chrono::steady_clock::now();
    const at::Tensor y = model.forward({x}).toTensor().contiguous();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    std::cout << "input " << x.sizes() << " " << x.scalar_type() << " -> output " << y.sizes()
              << " " << y.scalar_type() << " in " << ms << " ms\n";
    const at::Tensor flat = y.to(at::kFloat).reshape({-1});
    const int64_t shown = std::min<int64_t>(flat.numel(), 8);
    std::cout << "first values:";
    for (int64_t i = 0; i < shown; ++i) std::printf(" %.9g", flat[i].item<float>());
    std::cout << "\n";
    if (argc == 4) write_file(argv[3], torch::jit::pickle_save(y));
  } catch (const std::exception& e) {
    std::cerr << "run_scripted: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

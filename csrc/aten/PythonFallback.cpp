#include "aten/PythonFallback.h"

#include "runtime/NeuronPython.h"

#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>
#include <torch/library.h>

#include <memory>
#include <vector>

namespace py = pybind11;

namespace at::neuron {
namespace {

bool has_kind(const c10::Argument& argument, c10::TypeKind kind) {
  const auto& type = argument.real_type();
  if (type->kind() == kind) {
    return true;
  }
  auto optional = type->cast<c10::OptionalType>();
  return optional != nullptr && optional->getElementType()->kind() == kind;
}

// An argument as the op's Python binding receives it. The dispatcher stores dtypes, layouts and
// memory formats as integers; the schema says which they are.
py::object to_python(const c10::Argument& argument, const c10::IValue& value) {
  if (value.isNone()) {
    return py::none();
  }
  if (has_kind(argument, c10::ScalarTypeType::Kind)) {
    return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(value.toScalarType())));
  }
  if (has_kind(argument, c10::LayoutType::Kind)) {
    return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPLayout(value.toLayout())));
  }
  if (has_kind(argument, c10::MemoryFormatType::Kind)) {
    return py::reinterpret_borrow<py::object>(torch::utils::getTHPMemoryFormat(value.toMemoryFormat()));
  }
  return torch::jit::toPyObject(value);
}

void push_results(const c10::FunctionSchema& schema, torch::jit::Stack* stack, const py::object& result) {
  const auto& returns = schema.returns();
  if (returns.empty()) {
    return;
  }
  if (returns.size() == 1) {
    stack->push_back(torch::jit::toIValue(result, returns[0].real_type()));
    return;
  }
  TORCH_CHECK(py::isinstance<py::sequence>(result) && py::len(result) == returns.size(), schema.name(),
              ": the neuron fallback returned ", py::str(result.get_type()).cast<std::string>(), ", not ",
              returns.size(), " results");
  auto results = result.cast<py::sequence>();
  for (size_t i = 0; i < returns.size(); ++i) {
    stack->push_back(torch::jit::toIValue(results[i], returns[i].real_type()));
  }
}

class PythonFallback final : public c10::OperatorKernel {
 public:
  // The handler is leaked on purpose: the dispatcher may outlive the interpreter.
  explicit PythonFallback(py::object handler) : handler_(handler.release().ptr()) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack) {
    const auto& schema = op.schema();
    torch::jit::Stack arguments = torch::jit::pop(*stack, schema.arguments().size());
    py::gil_scoped_acquire gil;
    try {
      py::list args;
      py::dict kwargs;
      for (size_t i = 0; i < arguments.size(); ++i) {
        const auto& argument = schema.arguments()[i];
        py::object value = to_python(argument, arguments[i]);
        if (argument.kwarg_only()) {
          kwargs[py::str(argument.name())] = std::move(value);
        } else {
          args.append(std::move(value));
        }
      }
      py::object result = py::handle(handler_)(torch::detail::getTorchApiFunction(op), *args, **kwargs);
      push_results(schema, stack, result);
    } catch (py::error_already_set& error) {
      c10::neuron::rethrow_python_error(error);
    }
  }

 private:
  PyObject* handler_;
};

} // namespace

void register_python_fallback(const std::string& dispatch_key, py::object handler) {
  // Leaked with the handlers: a fallback stays registered for the life of the process.
  static auto* libraries = new std::vector<std::unique_ptr<torch::Library>>();
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "_", c10::parseDispatchKey(dispatch_key),
                                                  __FILE__, __LINE__);
  library->fallback(torch::CppFunction::makeFromBoxedFunctor(std::make_unique<PythonFallback>(std::move(handler))));
  libraries->push_back(std::move(library));
}

} // namespace at::neuron

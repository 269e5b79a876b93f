#pragma once

#include <stdexcept>
#include <string>

namespace numabind {

// Every failure the user can cause or meet carries one readable line.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Bad user input (option values, environment, spec strings): CLI exit status 2.
class UsageError : public Error {
public:
    explicit UsageError(const std::string& message) : Error(message) {}
};

// No accelerator this process could bind to (none found on the node, or none visible):
// the C API reports it as error_kind "no_accelerator" (Python: bound False and a warning).
class NoAcceleratorError : public Error {
public:
    explicit NoAcceleratorError(const std::string& message) : Error(message) {}
};

}  // namespace numabind

// What the extension's entry points share (longattn_ext.cpp defines them): the Python
// exception for a Status, empty tensors kept present, sm_margin, and the backend named by a
// string.
#pragma once

#include <cstdint>
#include <string>

#include "longattn/longattn.h"

namespace nanobind {
class module_;
}

namespace longattn_py {

// Raises the Python exception the FlashAttention-style API documents for a failed Status
// (invalid_argument: ValueError, not_supported: NotImplementedError, else RuntimeError).
void raise_if_error(const longattn::Status& s);

// An empty tensor may have a null pointer (torch, NumPy); it is kept "present" (a one-byte
// sentinel, never read) so that validation reports its shape rather than its absence.
void keep_present(longattn::Tensor& t);

// An int field of Args (sm_margin, cp_world, cp_rank) from a Python int: clamped to int, which
// keeps its meaning (a margin past the SMs leaves one SM; a rank or world past int is out of
// range either way) and its sign, for validation to name.
inline int int_clamped(int64_t m) { return m > INT32_MAX ? INT32_MAX : m < INT32_MIN ? INT32_MIN : int(m); }

// "auto" | "reference" | "cpu" | "cuda"; ValueError naming `backend` otherwise.
longattn::Backend backend_from(const std::string& s);

// torch_fastpath.cpp: init_torch_fastpath and dense_forward.
void register_torch_fastpath(nanobind::module_& m);

}  // namespace longattn_py

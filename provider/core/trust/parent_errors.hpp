// The errors of a parent (storage key) that is not verified: the pins
// (known_parents.hpp) and the EK proof (endorsement.hpp) both raise them,
// and their callers tell them apart by class. Nothing secret was sent
// under a parent that raised one.
#pragma once

#include "core/base/error.hpp"

namespace tpmkey {

// A parent that cannot be verified: not the pinned one, or pinned only
// for other TPMs (ParentMismatch), or the pins cannot be trusted
// (UnusablePinFile). Its message says so; nothing secret was sent under it.
class UnverifiedParent : public Error {
public:
    using Error::Error;
};
class ParentMismatch : public UnverifiedParent {
public:
    using UnverifiedParent::UnverifiedParent;
};
class UnusablePinFile : public UnverifiedParent {
public:
    using UnverifiedParent::UnverifiedParent;
};
// No pin for this TPM, its handle pinned for other TPMs under other names,
// and an EK trusted on first use: refused until `tpmkey trust-tpm`.
class NewTpmRefused : public ParentMismatch {
public:
    using ParentMismatch::ParentMismatch;
};
// A parent proven but not pinned (the file could not be written), where
// that is not enough: the module sends no PIN under it.
class PinNotRecorded : public UnverifiedParent {
public:
    using UnverifiedParent::UnverifiedParent;
};
// A cleared TPM met where no one accepts it (ParentPolicy::accept_clear).
class ClearNotAccepted : public UnverifiedParent {
public:
    using UnverifiedParent::UnverifiedParent;
};

// A parent that failed the proof (or whose EK could not be found or
// re-created). Its message names the step that failed; nothing secret was
// sent under the parent.
class ParentProofFailed : public UnverifiedParent {
public:
    using UnverifiedParent::UnverifiedParent;
};

}  // namespace tpmkey

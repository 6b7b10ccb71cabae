/**
 * @rx/kernel/testing: what tests of rx's extensions use, outside the kernel's core.
 * `StoreConformance` is the contract every `StateStore` must meet.
 */
export * as StoreConformance from "./StoreConformance.js"

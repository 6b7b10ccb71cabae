import { defineProject, mergeConfig } from "vitest/config"
import { shared } from "../../vitest.shared.js"

/** Packing and four npm installs take minutes, not seconds. */
export default mergeConfig(
  shared,
  defineProject({ test: { name: "consumer", testTimeout: 600_000, hookTimeout: 300_000 } })
)

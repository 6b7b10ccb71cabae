import { defineProject, mergeConfig } from "vitest/config"
import { shared } from "../../vitest.shared.js"

// Pure tests: on threads sharing one module graph a worker (vitest.config.ts), in a group of their
// own before the others, so they never run beside the forks.
export default mergeConfig(shared, defineProject({ test: { name: "llm", pool: "threads", sequence: { groupOrder: -1 } } }))

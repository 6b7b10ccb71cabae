import { defineProject, mergeConfig } from "vitest/config"
import { pure, shared } from "../../vitest.shared.js"

export default mergeConfig(shared, defineProject({ test: { name: "formats", ...pure } }))

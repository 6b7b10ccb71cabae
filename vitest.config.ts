import { defineConfig } from "vitest/config"

// Two cores here: keep the workers few so real-process and SQLite tests are not starved.
export default defineConfig({
  test: {
    workspace: "vitest.workspace.ts",
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } }
  }
})

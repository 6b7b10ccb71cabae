import { defineProject, mergeConfig } from "vitest/config"
import { shared } from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "cluster",
      // Starts Postgres (scripts/postgres.sh) when none answers on 127.0.0.1, and builds the
      // package (the worker processes run `dist/`).
      globalSetup: ["./test/globalSetup.ts"]
    }
  })
)

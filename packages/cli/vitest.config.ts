import { defineProject, mergeConfig } from "vitest/config"
import { shared } from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "cli",
      // Postgres for the cluster's tests: started (scripts/postgres.sh) when none answers on 127.0.0.1.
      globalSetup: ["../store-pg/test/globalSetup.ts"]
    }
  })
)

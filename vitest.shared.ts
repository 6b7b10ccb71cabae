import { defineProject } from "vitest/config"

/** Resolve workspace packages to their TypeScript sources, so tests need no build. */
export const shared = defineProject({
  resolve: { conditions: ["@rx/source"] },
  ssr: { resolve: { conditions: ["@rx/source"] } },
  test: {
    include: ["test/**/*.test.ts"],
    // Only a test that hangs reaches these: a loaded machine may take several times as long as an
    // idle one (a suite of 7 minutes took 19 beside a CPU burner), and tests wait for events, not clocks.
    testTimeout: 300_000,
    hookTimeout: 300_000
  }
})

/**
 * A project of pure tests (no process state, no global mocks): on threads sharing one module
 * graph a worker (vitest.config.ts), in a group of its own before the others, so they never run
 * beside the forks.
 */
export const pure = { pool: "threads", sequence: { groupOrder: -1 } } as const

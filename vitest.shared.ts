import { defineProject } from "vitest/config"

/** Resolve workspace packages to their TypeScript sources, so tests need no build. */
export const shared = defineProject({
  resolve: { conditions: ["@rx/source"] },
  ssr: { resolve: { conditions: ["@rx/source"] } },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
})

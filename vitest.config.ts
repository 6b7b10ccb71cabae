import { defineConfig } from "vitest/config"
import Sequencer from "./scripts/sequencer.js"

export default defineConfig({
  test: {
    // Every package with tests, and the consumer test; `pnpm test` runs them all.
    projects: ["packages/*/vitest.config.ts", "examples/*/vitest.config.ts"],
    // Two cores here: few workers, so real-process and SQLite tests are not starved. Three forks,
    // not two: many files spend much of their time waiting on processes, servers and sleeps, and
    // with two the cores stood idle meanwhile (a whole run took 545 s with two, 513 with three).
    pool: "forks",
    // Projects of pure tests (no process state, no global mocks) run on threads, one module graph
    // a worker rather than one a file.
    poolOptions: { forks: { maxForks: 3, minForks: 1 }, threads: { maxThreads: 2, minThreads: 1, isolate: false } },
    sequence: { sequencer: Sequencer },
    reporters: ["default", "./scripts/summary-reporter.ts"]
  }
})

/**
 * The order test files start in: the slowest first, so none is left running alone at the end.
 * Vitest orders by the durations it cached on the last run, and a fresh clone (CI) has none: it
 * would order by file size, and the soak and install tests, short files, would start last.
 */
import { BaseSequencer, type TestSpecification } from "vitest/node"

/** The slowest files, slowest first (as measured on 2 cores: from about 3 minutes down to 30 s). */
const slowest = [
  "examples/consumer/test/consumer.test.ts",
  "packages/cli/test/soak.test.ts",
  "packages/cli/test/install.test.ts",
  "packages/tools/test/workspace.test.ts",
  "packages/server/test/Ui.test.ts",
  "packages/cli/test/cluster.test.ts",
  "packages/cluster/test/Workers.test.ts",
  "packages/cli/test/agent-loop.test.ts",
  "packages/cli/test/golden.test.ts",
  "packages/cli/test/delegate.test.ts",
  "packages/cli/test/llama.test.ts",
  "packages/store-sqlite/test/Crash.test.ts",
  "packages/cli/test/first-hour.test.ts",
  "packages/store-pg/test/Crash.test.ts",
  "packages/llama/test/LlamaCpp.test.ts"
]

const rank = (spec: TestSpecification): number => {
  const index = slowest.findIndex((file) => spec.moduleId.endsWith(`/${file}`))
  return index === -1 ? slowest.length : index
}

export default class Sequencer extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    // Stable: the rest keep vitest's own order.
    return [...(await super.sort(files))].sort((a, b) => rank(a) - rank(b))
  }
}

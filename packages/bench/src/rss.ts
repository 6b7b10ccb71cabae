/** Child process: run one memory-store goal of N iterations and print its peak RSS in MB. */
import { Effect } from "effect"
import { memoryRun } from "./Scenario.js"

const iterations = Number(process.argv[2] ?? "10000")
await Effect.runPromise(memoryRun(iterations))
console.log(JSON.stringify({ peakRssMb: process.resourceUsage().maxRSS / 1024 }))

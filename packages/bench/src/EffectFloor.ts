/**
 * `pnpm --filter @rx/bench run effect-floor [--effect4 VERSION] [--rounds N] [--json]`: how fast a
 * program on Effect can start, on the Effect 3 rx is built on and on Effect 4 (installed from the
 * npm registry into a temporary folder). The same program on each, bundled by esbuild into one
 * CommonJS file: 20 `Schema.TaggedClass`es (a log's event kinds), a decode through their union,
 * `Effect.runSync`, one line printed. Each run is a new process with Node's compile cache (its own
 * folder per version, filled by two runs first), beside `node -e 0`, in interleaved rounds.
 *
 * What it answers: whether a start-up target stated as a multiple of `node -e 0` can be met by a
 * binary on Effect at all, before its own modules, better-sqlite3's addon and its command.
 */
import { build } from "esbuild"
import { Effect, Schema } from "effect"
import { execFileSync, spawnSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { flagValue, median, round } from "./Figures.js"
import * as TempDir from "./TempDir.js"

/** Installing Effect 4, or a run of a program, failed. */
class FloorError extends Schema.TaggedError<FloorError>()("FloorError", { message: Schema.String }) {}

/** The version of the `effect` rx is built on, as installed here. */
const effect3: string = JSON.parse(readFileSync(createRequire(import.meta.url).resolve("effect/package.json"), "utf8")).version

const effect4 = flagValue("--effect4") ?? "4.1.5"
const rounds = Number(flagValue("--rounds") ?? "21")
const json = process.argv.includes("--json")

/** The program, for `Schema.Union` as each version takes its members (Effect 4: an array). */
const program = (union: (members: string) => string) => {
  const names = Array.from({ length: 20 }, (_, i) => `E${i}`)
  return [
    `import { Effect, Schema } from "effect"`,
    ...names.map((name) =>
      `class ${name} extends Schema.TaggedClass()("${name}", { a: Schema.String, b: Schema.Number, c: Schema.optional(Schema.Array(Schema.String)) }) {}`
    ),
    `const decoded = Schema.decodeUnknownSync(${union(names.join(", "))})({ _tag: "E7", a: "x", b: 1 })`,
    `Effect.runSync(Effect.sync(() => process.stdout.write(decoded._tag + "\\n")))`
  ].join("\n")
}

/** Bundle `source`, resolving `effect` from `resolveDir`, into `outfile`. */
const bundle = (source: string, resolveDir: string, outfile: string) =>
  Effect.tryPromise({
    try: () => build({ stdin: { contents: source, resolveDir, loader: "js" }, bundle: true, platform: "node", format: "cjs", outfile, logLevel: "error" }),
    catch: (error) => new FloorError({ message: `bundling ${outfile} failed: ${error instanceof Error ? error.message : String(error)}` })
  })

/** Milliseconds from the spawn to the exit of `node args...`; a run that fails stops the measurement. */
const time = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv) =>
  Effect.suspend(() => {
    const started = performance.now()
    const ran = spawnSync(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] })
    const ms = performance.now() - started
    return ran.status === 0 ? Effect.succeed(ms) : new FloorError({ message: `node ${args.join(" ")} failed: ${ran.stderr.toString()}` })
  })


const measure = Effect.gen(function*() {
  const dir = yield* TempDir.make("rx-effect-floor-")
  const four = join(dir, "effect4")
  mkdirSync(four)
  writeFileSync(join(four, "package.json"), JSON.stringify({ name: "effect-floor", private: true }))
  if (!json) console.log(`installing effect@${effect4} (npm registry)`)
  yield* Effect.try({
    try: () => execFileSync("npm", ["install", "--no-audit", "--no-fund", "--ignore-scripts", `effect@${effect4}`], { cwd: four, stdio: ["ignore", "ignore", "pipe"] }),
    catch: (error) => new FloorError({ message: `npm install effect@${effect4} failed: ${error instanceof Error ? error.message : String(error)}` })
  })
  const files = { effect3: join(dir, "effect3.cjs"), effect4: join(dir, "effect4.cjs") }
  yield* bundle(program((members) => `Schema.Union(${members})`), import.meta.dirname, files.effect3)
  yield* bundle(program((members) => `Schema.Union([${members}])`), four, files.effect4)
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("NODE_")))
  const cached = (version: keyof typeof files) => ({ ...env, NODE_COMPILE_CACHE: join(dir, `cache-${version}`) })
  for (const version of ["effect3", "effect4"] as const) for (let i = 0; i < 2; i++) yield* time([files[version]], cached(version))
  const samples = { node: [] as Array<number>, effect3: [] as Array<number>, effect4: [] as Array<number> }
  for (let i = 0; i < rounds; i++) {
    samples.node.push(yield* time(["-e", "0"], env))
    samples.effect3.push(yield* time([files.effect3], cached("effect3")))
    samples.effect4.push(yield* time([files.effect4], cached("effect4")))
  }
  const node = median(samples.node)
  return {
    node_version: process.version,
    effect3_version: effect3,
    effect4_version: effect4,
    rounds,
    ms: { node: round(node), effect3: round(median(samples.effect3)), effect4: round(median(samples.effect4)) },
    over_node: { effect3: round(median(samples.effect3) / node, 2), effect4: round(median(samples.effect4) / node, 2) }
  }
})

const figures = await Effect.runPromise(Effect.scoped(measure))
if (json) console.log(JSON.stringify(figures))
else {
  console.log(`node -e 0: ${figures.ms.node} ms (${figures.node_version}, ${figures.rounds} rounds)`)
  console.log(`Effect ${figures.effect3_version}: ${figures.ms.effect3} ms (${figures.over_node.effect3}x); Effect ${figures.effect4_version}: ${figures.ms.effect4} ms (${figures.over_node.effect4}x)`)
}

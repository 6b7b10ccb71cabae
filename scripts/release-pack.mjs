// Write the tarballs `changeset publish` would publish: one `pnpm pack` (what `pnpm publish`
// uploads: `workspace:` ranges replaced, the root LICENSE added) per workspace package that is
// not private. Run after `pnpm build`.
//
//   node scripts/release-pack.mjs [destination]   (default: dist-release/)
//
// Prints each tarball's path, one a line. Refuses a build with output whose source is gone
// (a renamed or deleted module would be published): `pnpm exec tsc -b --clean` then rebuild.
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const destination = resolve(process.argv[2] ?? join(root, "dist-release"))

/** Run pnpm: the one running this script (`pnpm release:pack`, also through corepack), else PATH's. */
const pnpm = (args, cwd) => {
  const self = process.env.npm_execpath
  const options = { cwd, encoding: "utf8" }
  return self !== undefined && /pnpm/.test(self)
    ? execFileSync(process.execPath, [self, ...args], options)
    : execFileSync("pnpm", args, options)
}

const listed = JSON.parse(pnpm(["ls", "--recursive", "--depth", "-1", "--json"], root))
const packages = listed
  .filter((pkg) => pkg.private !== true && pkg.path !== root)
  .sort((a, b) => a.name.localeCompare(b.name))

/** Built files under dist/src whose TypeScript source no longer exists. */
const stale = (dir) => {
  const out = []
  const walk = (built) => {
    if (!existsSync(built)) return
    for (const name of readdirSync(built)) {
      const path = join(built, name)
      if (statSync(path).isDirectory()) walk(path)
      else if (name.endsWith(".js")) {
        const source = join(dir, "src", relative(join(dir, "dist", "src"), path)).replace(/\.js$/, ".ts")
        if (!existsSync(source)) out.push(relative(root, path))
      }
    }
  }
  walk(join(dir, "dist", "src"))
  return out
}

const problems = packages.flatMap((pkg) =>
  existsSync(join(pkg.path, "dist", "src")) ? stale(pkg.path) : [`${relative(root, pkg.path)}/dist/src is missing: run pnpm build`]
)
if (problems.length > 0) {
  console.error(`release:pack: the build does not match the sources:\n  ${problems.join("\n  ")}`)
  process.exit(1)
}

rmSync(destination, { recursive: true, force: true })
mkdirSync(destination, { recursive: true })
for (const pkg of packages) {
  console.log(JSON.parse(pnpm(["pack", "--pack-destination", destination, "--json"], pkg.path)).filename)
}

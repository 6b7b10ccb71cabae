// Write rx's tiny test model (TinyGguf): a 0.5 MB GGUF whose answers are random but always
// well-formed actions, to try `rx run --model-file` with no downloaded weights. Its trained
// context is 65,536 tokens, so rx's default --context (16,384) applies and the default prompt
// budget fits: the first run does not suspend for want of context.
//
//   node packages/llama/scripts/tiny-model.mjs [FILE] [--context TOKENS]   (after pnpm build)
//
// FILE defaults to ./rx-tiny.gguf.
import { resolve } from "node:path"
import { writeTinyGguf } from "../dist/src/TinyGguf.js"

const args = process.argv.slice(2)
const at = args.indexOf("--context")
const context = at < 0 ? 65_536 : Number(args[at + 1])
if (!Number.isSafeInteger(context) || context < 512 || context > 1_048_576) {
  console.error(`tiny-model: --context: expected a whole number of tokens from 512 to 1048576, got ${JSON.stringify(args[at + 1] ?? "")}`)
  process.exit(1)
}
const rest = args.filter((_, i) => at < 0 || (i !== at && i !== at + 1))
const file = resolve(rest[0] ?? "rx-tiny.gguf")
const size = writeTinyGguf(file, { context })
console.log(`wrote ${file} (${size.toLocaleString("en")} bytes, context ${context.toLocaleString("en")} tokens)`)
console.log(`try it: rx run "list the files" --model-file ${file} --threads 1 --seed 1 --max-iterations 3`)

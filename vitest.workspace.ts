/** Every package with tests; `pnpm test` runs them all, one package at a time per worker. */
export default ["packages/*/vitest.config.ts"]

// Counts what a run of the HTTP caching suite (`http-cache-tests`, the suite behind
// cache-tests.fyi) passed, as its own pages count it: a test passes when its result is a pass
// and every test it depends on passed; "required" and "optimal" tests are counted, "check"
// tests (information, not conformance) are not.
//
// Usage: node scripts/cache-tests-summary.mjs SUITE_DIR RESULTS.json [FLOOR]
// Prints one line per group and a total (with CACHE_TESTS_FAILED=1 in the environment, the
// tests each group failed, before it); with FLOOR, exits 1 when fewer passed.

import { existsSync, readFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { join, resolve } from 'node:path'

const [suiteDir, resultsFile, floor] = process.argv.slice(2)
if (!suiteDir || !resultsFile) {
  console.error('usage: node scripts/cache-tests-summary.mjs SUITE_DIR RESULTS.json [FLOOR]')
  process.exit(2)
}
const load = (path) => import(pathToFileURL(resolve(join(suiteDir, path))).href)
const suites = (await load('tests/index.mjs')).default
// The npm package (0.4.x) keeps its engine at the top and Surrogate-Control apart; the
// GitHub repository keeps its engine in test-engine/.
const github = existsSync(join(suiteDir, 'test-engine/lib/results.mjs'))
if (!github) suites.push((await load('tests/surrogate-control.mjs')).default)
const display = await load(github ? 'test-engine/lib/results.mjs' : 'lib/display.mjs')
const results = JSON.parse(readFileSync(resultsFile, 'utf8'))

let passed = 0
let counted = 0
const lines = []
for (const suite of suites) {
  let suitePassed = 0
  let suiteCounted = 0
  for (const test of suite.tests) {
    if (test.kind === 'check') continue
    suiteCounted += 1
    const shown = display.determineTestResult(suites, test.id, results)
    if (shown[2] === '✅') suitePassed += 1
    else if (process.env.CACHE_TESTS_FAILED) lines.push(`  failed: ${test.id} ${shown[2]} ${test.name}`)
  }
  if (suiteCounted === 0) continue
  passed += suitePassed
  counted += suiteCounted
  lines.push(`${suite.id}: ${suitePassed} of ${suiteCounted}`)
}
console.log(lines.join('\n'))
console.log(`cache-tests: ${passed} of ${counted} required and optimal tests passed`)
if (floor !== undefined && passed < Number(floor)) {
  console.error(`cache-tests: ${passed} is below the floor of ${floor}`)
  process.exit(1)
}

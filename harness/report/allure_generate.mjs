// `allure generate` with powercut's sign-off gates in Allure 3's Quality Gates tab.
//
// Allure 3.18's `generate` command never evaluates the config's qualityGate (only `allure
// run` and `allure quality-gate` do, and only `run` shows the results in the report), so
// harness/report/html.py runs this instead: the same steps as `generate` (readConfig, start,
// readDirectory, done), with one custom rule per powercut gate validated in between and its
// results sent to the report, as `allure run` does. powercut evaluates the gates itself
// (harness/report/gates.py: they decide `powercut run`'s exit code); each rule here reports
// that verdict, with the scenarios that broke it linked as the rule's test results.
//
// usage: node allure_generate.mjs CORE_INDEX_JS CONFIG_JSON OUTPUT_DIR GATES_JSON RESULTS_DIR...
import { pathToFileURL } from "node:url";
import { readFile } from "node:fs/promises";

const [coreIndex, configPath, output, gatesPath, ...resultsDirs] = process.argv.slice(2);
if (!coreIndex || !configPath || !output || !gatesPath || resultsDirs.length === 0) {
  console.error("usage: allure_generate.mjs CORE_INDEX_JS CONFIG_JSON OUTPUT_DIR GATES_JSON RESULTS_DIR...");
  process.exit(2);
}
// Allure 3.18's QualityGate.validate calls Iterator.prototype.toArray (an iterator helper
// of Node.js 22); Node.js 20, which Allure 3 otherwise runs on, lacks it.
const iteratorPrototype = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
if (typeof iteratorPrototype.toArray !== "function") {
  Object.defineProperty(iteratorPrototype, "toArray", {
    value() {
      return Array.from(this);
    },
    configurable: true,
    writable: true,
  });
}
const core = await import(pathToFileURL(coreIndex).href);
const gates = JSON.parse(await readFile(gatesPath, "utf8"));
const config = await core.readConfig(process.cwd(), configPath, { output });

// One rule per gate: "powercut:<n>" keeps the rule ids unique; the gate's name is the key.
const use = [];
const ruleset = {};
gates.forEach((gate, i) => {
  const key = gate.name;
  use.push({
    rule: key,
    message: () => `${gate.name}: ${gate.detail}`,
    successMessage: () => `${gate.name}: ${gate.detail}`,
    validate: async ({ trs }) => {
      const names = new Set(gate.scenarios ?? []);
      return {
        success: gate.passed,
        actual: gate.actual ?? (gate.passed ? "passed" : "failed"),
        testResults: trs.filter((tr) => names.has(tr.name)).map((tr) => tr.id),
      };
    },
  });
  ruleset[key] = gate.expected ?? "pass";
});
if (gates.length > 0) {
  config.qualityGate = { rules: [ruleset], use };
}

const report = new core.AllureReport(config);
await report.start();
for (const dir of resultsDirs) {
  await report.readDirectory(dir);
}
if (gates.length > 0) {
  const trs = await report.store.allTestResults({ includeRetries: false });
  const { results } = await report.validate({ trs });
  report.realtimeDispatcher.sendQualityGateResults(results);
}
await report.done();

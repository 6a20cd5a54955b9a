/**
 * Prints one plain closing line, `jest: N passed, N failed, N skipped`, that tools reading a
 * test run's last lines understand (Jest's own summary has another shape).
 */
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    // Suites that failed to run count as failures too.
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    process.stdout.write(`\njest: ${results.numPassedTests} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
module.exports = SummaryReporter;

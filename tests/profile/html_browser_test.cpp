// `galley prof --html` reports opened in a real browser: headless Chromium (Debian's `chromium`,
// which scripts/install-deps installs) loads the page, and the DOM it dumps after the page's script
// ran holds the script's own status (html_report.js): no error caught, how many timeline events it
// drew and their names. Chromium's log of the page's console must be empty too. A screenshot of
// the report is kept in the build tree (profile-html/). Skipped, saying why, without a Chromium.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/run_command.hpp"
#include "profile/html_report.hpp"

namespace galley::profile {
namespace {

using nlohmann::json;

const std::string kGalley = std::string(GALLEY_TEST_BIN_DIR) + "/galley";
const std::filesystem::path kArtifacts =
    std::filesystem::path(GALLEY_TEST_BIN_DIR).parent_path() / "profile-html";
const std::string kSmallConv = "bench conv -n 1 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1 --device cpu -i 3";

// The browser to use: GALLEY_TEST_CHROMIUM, else the first of Debian's and others' names on PATH.
std::string find_chromium() {
  if (const char* chosen = std::getenv("GALLEY_TEST_CHROMIUM"); chosen != nullptr && *chosen != '\0')
    return chosen;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
    const auto r = galley::testing::run_command(std::string("command -v ") + name + " 2>/dev/null");
    if (r.exit_code == 0 && !r.output.empty()) return r.output.substr(0, r.output.find('\n'));
  }
  return {};
}

#define REQUIRE_CHROMIUM(variable)                                                                 \
  const std::string variable = find_chromium();                                                    \
  if (variable.empty()) {                                                                          \
    GTEST_SKIP() << "no Chromium: install Debian's chromium (scripts/install-deps does) or set "   \
                    "GALLEY_TEST_CHROMIUM to a Chromium or Chrome binary to run the browser test"; \
  }

std::string read(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string html_unescaped(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    bool replaced = false;
    for (const auto& [entity, c] :
         {std::pair{"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}, {"&amp;", '&'}}) {
      if (text.compare(i, std::char_traits<char>::length(entity), entity) == 0) {
        out += c;
        i += std::char_traits<char>::length(entity) - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += text[i];
  }
  return out;
}

struct Rendered {
  std::string dom;
  json status;                       // the page script's own report
  std::vector<std::string> console;  // every console message Chromium logged
};

// Opens `page` (with `fragment` after its URL) in headless Chromium, lets its script run, returns
// the DOM and the console; with `screenshot`, also saves the window as a PNG there.
Rendered render(const std::string& chromium, const std::filesystem::path& page, const std::string& screenshot,
                const std::string& fragment = "") {
  const auto work = std::filesystem::temp_directory_path() /
                    ("galley-browser-test-" + std::to_string(::getpid()) + "-" + page.stem().string());
  std::filesystem::create_directories(work);
  const auto log = work / "chromium.log";
  std::string command = "timeout -s KILL 60 " + chromium +
                        " --headless --disable-gpu --no-sandbox --no-first-run --no-default-browser-check"
                        " --disable-extensions --disable-dev-shm-usage --hide-scrollbars"
                        " --user-data-dir=" +
                        (work / "profile").string() +
                        " --window-size=1400,1300 --virtual-time-budget=5000"
                        " --enable-logging=stderr --v=0 --dump-dom";
  if (!screenshot.empty()) command += " --screenshot=" + screenshot;
  command += " 'file://" + std::filesystem::absolute(page).string() + fragment + "' 2>" + log.string();
  Rendered out;
  const auto r = galley::testing::run_command(command);
  out.dom = r.output;
  EXPECT_EQ(r.exit_code, 0) << command << "\n" << read(log);
  std::istringstream lines(read(log));
  for (std::string line; std::getline(lines, line);)
    if (line.find(":CONSOLE") != std::string::npos) out.console.push_back(line);
  std::filesystem::remove_all(work / "profile");

  const std::string open = std::string("id=\"") + kHtmlReportStatusId + "\"";
  const auto at = out.dom.find(open);
  const auto from = at == std::string::npos ? at : out.dom.find('>', at);
  const auto to = from == std::string::npos ? from : out.dom.find("</pre>", from);
  if (to == std::string::npos) {
    ADD_FAILURE() << "no status element in the DOM Chromium dumped:\n" << out.dom.substr(0, 2000);
    return out;
  }
  try {
    out.status = json::parse(html_unescaped(out.dom.substr(from + 1, to - from - 1)));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the status is not JSON (" << e.what()
                  << "): " << out.dom.substr(from + 1, to - from - 1);
  }
  return out;
}

// What every report must show: the script ran to the end, caught nothing, drew the timeline.
void expect_rendered_cleanly(const Rendered& page) {
  ASSERT_TRUE(page.status.is_object());
  EXPECT_EQ(page.status.value("state", ""), "ok")
      << "the page's script did not finish cleanly (\"loading\": it never ran or stopped early): "
      << page.status.dump(1);
  EXPECT_TRUE(page.status["errors"].empty()) << page.status.dump(1);
  EXPECT_TRUE(page.console.empty()) << "console messages:\n" << ::testing::PrintToString(page.console);
  EXPECT_GT(page.status.value("events_drawn", 0), 0) << page.status.dump(1);
}

bool has(const json& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(HtmlReportInBrowser, ABenchRunRendersItsTimelineAndTablesWithoutErrors) {
  REQUIRE_CHROMIUM(chromium);
  std::filesystem::create_directories(kArtifacts);
  const auto html = kArtifacts / "bench-conv.html";
  const auto png = kArtifacts / "bench-conv.png";
  std::filesystem::remove(png);
  const auto run = galley::testing::run_command("timeout -s KILL 120 " + kGalley + " prof --html " +
                                                html.string() + " -- " + kSmallConv + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // #selftest: the page also drives its timeline with synthetic mouse, wheel and key events and
  // clicks a table header, and reports what each did.
  const Rendered page = render(chromium, html, png.string(), "#selftest");
  expect_rendered_cleanly(page);
  const json& s = page.status;
  ASSERT_TRUE(s.contains("selftest") && s["selftest"].is_object()) << s.dump(1);
  for (const char* step : {"hover", "flow_drawn", "wheel_zoom", "key_pan", "double_click_zoom", "drag_pan",
                           "leave_hides_tooltip", "fit", "sort"})
    EXPECT_EQ(s["selftest"].value(step, false), true) << step << ": " << s.dump(1);
  EXPECT_GT(s.value("flows", 0), 0) << s.dump(1);
  // Host and device rows; every span in view at first (the whole run), the conv solver among them.
  EXPECT_GE(s.value("tracks", 0), 2) << s.dump(1);
  EXPECT_EQ(s.value("events_drawn", 0), s.value("spans", -1)) << s.dump(1);
  bool conv = false;
  for (const auto& name : s["names_drawn"]) conv |= name.get<std::string>().starts_with("cpu.conv.");
  EXPECT_TRUE(conv) << s.dump(1);
  EXPECT_TRUE(has(s["names_drawn"], "copy_h2d")) << s.dump(1);
  EXPECT_TRUE(has(s["names_drawn"], "tuner.pick")) << s.dump(1);
  EXPECT_GT(s.value("op_rows", 0), 0) << s.dump(1);
  EXPECT_GT(s.value("memory_points", 0), 0) << s.dump(1);
  EXPECT_GT(s.value("tuner_rows", 0), 0) << s.dump(1);
  // The tables were built in the DOM.
  for (const char* heading :
       {"Ops and solvers", "T_total = sum(T_kernel) + sum(T_gap)", "Device memory", "Tuner and find-db"})
    EXPECT_NE(page.dom.find(heading), std::string::npos) << heading;
  EXPECT_NE(page.dom.find("<canvas"), std::string::npos);

  // The screenshot: a PNG of some substance, kept for a person to look at.
  const std::string image = read(png);
  ASSERT_GT(image.size(), 10'000u) << png;
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST(HtmlReportInBrowser, HostileNamesInATraceShowAsTextAndInjectNothing) {
  REQUIRE_CHROMIUM(chromium);
  std::filesystem::create_directories(kArtifacts);
  const std::string hostile = "</script><b id=\"injected\">x</b>";
  const json where = {
      {"device", "cpu"}, {"stream", 3}, {"op", hostile}, {"solver", hostile}, {"key", hostile}};
  const json events = json::array({
      {{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", "host"}}}},
      {{"ph", "X"},
       {"name", hostile},
       {"cat", "op"},
       {"ts", 0},
       {"dur", 30},
       {"pid", 0},
       {"tid", 1},
       {"args", {{"device", "cpu"}, {"stream", 3}, {"solver", hostile}, {"key", hostile}}}},
      {{"ph", "X"},
       {"name", "tuner.pick"},
       {"cat", "tune"},
       {"ts", 1},
       {"dur", 2},
       {"pid", 0},
       {"tid", 1},
       {"args",
        {{"device", "cpu"},
         {"key", hostile},
         {"solver", hostile},
         {"config", hostile},
         {"source", "tuned"},
         {"hit", false}}}},
      {{"ph", "X"},
       {"name", hostile},
       {"cat", "kernel"},
       {"ts", 5},
       {"dur", 20},
       {"pid", 1},
       {"tid", 3},
       {"args", where}},
      {{"ph", "C"},
       {"name", "memory"},
       {"ts", 4},
       {"pid", 1},
       {"args", {{"allocated", 256}, {"reserved", 4096}}}},
  });
  const auto trace = kArtifacts / "hostile.json";
  const auto html = kArtifacts / "hostile.html";
  std::ofstream(trace) << json{{"traceEvents", events}}.dump();
  const auto run = galley::testing::run_command(kGalley + " prof --in " + trace.string() + " --html " +
                                                html.string() + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;

  const Rendered page = render(chromium, html, "");
  expect_rendered_cleanly(page);
  // The name reached the timeline as the text it is, and no element came of it.
  EXPECT_TRUE(has(page.status["names_drawn"], hostile)) << page.status.dump(1);
  EXPECT_EQ(page.dom.find("<b id=\"injected\">"), std::string::npos);
  EXPECT_NE(page.dom.find("&lt;/script&gt;&lt;b id=\"injected\"&gt;x&lt;/b&gt;"), std::string::npos)
      << "the name is not shown as text in the tables";
}

}  // namespace
}  // namespace galley::profile

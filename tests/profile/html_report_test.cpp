// The HTML report generator: the page's structure, nothing loaded from elsewhere, text from the
// trace escaped (no "</script>" injection), the embedded JSON parsing back to the trace's spans and
// summary, the memory series from a recorded allocator history; and `galley prof --html`.
#include "profile/html_report.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/run_command.hpp"
#include "common/scoped_env.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "profile/chrome_trace.hpp"
#include "profile/html_report_assets.hpp"
#include "profile/summary.hpp"
#include "profile/tracer.hpp"

namespace galley::profile {
namespace {

using nlohmann::json;

const std::string kGalley = std::string(GALLEY_TEST_BIN_DIR) + "/galley";
const std::string kSmallConv = "bench conv -n 1 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1 --device cpu -i 3";
constexpr const char* kHostile = "</script><b id=\"injected\">&amp;'\"";

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The text of the data element, parsed.
json embedded_data(const std::string& page) {
  const std::string open = std::string("<script type=\"application/json\" id=\"") + kHtmlReportDataId + "\">";
  const auto from = page.find(open);
  if (from == std::string::npos) {
    ADD_FAILURE() << "no data element";
    return {};
  }
  const auto begin = from + open.size();
  const auto end = page.find("</script>", begin);
  if (end == std::string::npos) {
    ADD_FAILURE() << "the data element is not closed";
    return {};
  }
  return json::parse(page.substr(begin, end - begin));
}

json span(const std::string& name, const char* cat, int pid, int tid, double ts, double dur, json args) {
  return {{"ph", "X"},  {"name", name}, {"cat", cat}, {"pid", pid},
          {"tid", tid}, {"ts", ts},     {"dur", dur}, {"args", std::move(args)}};
}

json metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

// A host thread with an op, its tuner pick and launch nested inside, and a device stream with the
// kernel and a copy; `op` and `key` name them.
std::string hand_made_trace(const std::string& op, const std::string& key, bool with_memory) {
  json events = json::array();
  events.push_back(metadata("process_name", 0, 0, "host"));
  events.push_back(metadata("thread_name", 0, 1, "host thread 1"));
  events.push_back(metadata("process_name", 1, 0, "device cpu"));
  events.push_back(metadata("thread_name", 1, 7, "stream 7"));
  const json where = {{"device", "cpu"}, {"stream", 7}, {"op", op}, {"solver", "cpu.a"}, {"key", key}};
  events.push_back(
      span(op, "op", 0, 1, 0, 10, {{"device", "cpu"}, {"stream", 7}, {"solver", "cpu.a"}, {"key", key}}));
  events.push_back(span("tuner.pick", "tune", 0, 1, 1, 2,
                        {{"device", "cpu"},
                         {"key", key},
                         {"solver", "cpu.a"},
                         {"config", ""},
                         {"source", "user find-db"},
                         {"hit", true}}));
  events.push_back(span("cpu.a", "launch", 0, 1, 4, 3, where));
  events.push_back(
      span(op, "op", 0, 1, 30, 10, {{"device", "cpu"}, {"stream", 7}, {"solver", "cpu.a"}, {"key", key}}));
  events.push_back(span("tuner.pick", "tune", 0, 1, 31, 1,
                        {{"device", "cpu"},
                         {"key", key},
                         {"solver", "cpu.a"},
                         {"config", ""},
                         {"source", "cache"},
                         {"hit", true}}));
  events.push_back(span("cpu.a", "launch", 0, 1, 33, 3, where));
  events.push_back(span("cpu.a", "kernel", 1, 7, 5, 20, where));
  events.push_back(span("cpu.a", "kernel", 1, 7, 35, 10, where));
  events.push_back(
      span("copy_h2d", "copy", 1, 7, 50, 2.5, {{"device", "cpu"}, {"stream", 7}, {"bytes", 64}}));
  // The first launch's flow to its kernel, and a flow whose end was lost (left out of the page).
  events.push_back(
      {{"ph", "s"}, {"name", "launch"}, {"cat", "flow"}, {"id", 1}, {"ts", 5.5}, {"pid", 0}, {"tid", 1}});
  events.push_back({{"ph", "f"},
                    {"name", "launch"},
                    {"cat", "flow"},
                    {"id", 1},
                    {"ts", 5},
                    {"pid", 1},
                    {"tid", 7},
                    {"bp", "e"}});
  events.push_back(
      {{"ph", "s"}, {"name", "launch"}, {"cat", "flow"}, {"id", 2}, {"ts", 34.5}, {"pid", 0}, {"tid", 1}});
  if (with_memory) {
    for (const auto& [ts, allocated] : {std::pair{2.0, 4096}, {20.0, 8192}, {45.0, 0}}) {
      events.push_back({{"ph", "C"},
                        {"name", "memory"},
                        {"cat", "memory"},
                        {"ts", ts},
                        {"pid", 1},
                        {"args", {{"allocated", allocated}, {"reserved", 1 << 21}}}});
    }
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ns"}, {"otherData", {{"dropped_records", 0}}}}
      .dump();
}

TEST(HtmlReport, IsOnePageThatLoadsNothing) {
  const std::string page = html_report(hand_made_trace("conv_fwd", "conv-key", true), "galley bench conv");
  EXPECT_TRUE(page.starts_with("<!DOCTYPE html>")) << page.substr(0, 100);
  EXPECT_NE(page.find("</html>"), std::string::npos);
  EXPECT_NE(page.find("<meta charset=\"utf-8\">"), std::string::npos);
  EXPECT_NE(page.find("<title>Galley profile: galley bench conv</title>"), std::string::npos);
  EXPECT_EQ(count_of(page, "<style>"), 1u);
  EXPECT_EQ(count_of(page, "<script"), 2u);  // the data and the script, both inline
  EXPECT_EQ(count_of(page, "</script>"), 2u);
  EXPECT_NE(page.find(std::string("id=\"") + kHtmlReportStatusId + "\""), std::string::npos);
  // Nothing is fetched: no external script, style sheet, image or font, and a policy forbidding it.
  for (const char* fetch : {"src=", "href=", "<link", "@import", "url(", "http://", "https://"})
    EXPECT_EQ(page.find(fetch), std::string::npos) << fetch;
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos);
  // The assets are in, whole.
  EXPECT_NE(page.find(assets::html_report_js()), std::string::npos);
  EXPECT_NE(page.find(assets::html_report_css()), std::string::npos);
}

TEST(HtmlReport, AssetsCannotEndTheirOwnElements) {
  const std::string js(assets::html_report_js());
  const std::string css(assets::html_report_css());
  EXPECT_GT(js.size(), 1000u);
  EXPECT_GT(css.size(), 100u);
  EXPECT_NE(js.find("galley-status"), std::string::npos);
  EXPECT_NE(js.find("galley-data"), std::string::npos);
  for (const std::string& text : {js, css}) {
    std::string lower = text;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(lower.find("</script"), std::string::npos);
    EXPECT_EQ(lower.find("</style"), std::string::npos);
    EXPECT_EQ(lower.find("<!--"), std::string::npos);
  }
}

TEST(HtmlReport, EmbeddedDataParsesBackToTheTraceAndItsSummary) {
  const std::string trace = hand_made_trace("conv_fwd", "conv-key", true);
  const json data = embedded_data(html_report(trace, "t"));
  ASSERT_TRUE(data.is_object());
  EXPECT_EQ(data["format"], "galley-html-report");
  EXPECT_EQ(data["version"], 1);
  EXPECT_EQ(data["title"], "t");
  EXPECT_EQ(data["dropped"], 0);
  EXPECT_EQ(data["end_ns"], 52500);

  // Tracks: the host thread first, then the stream, named from the metadata; spans in ns.
  const json& tracks = data["tracks"];
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(tracks[0]["process"], "host");
  EXPECT_EQ(tracks[0]["name"], "host thread 1");
  EXPECT_EQ(tracks[0]["host"], true);
  EXPECT_EQ(tracks[0]["depth"], 2);  // op, then its pick and launch beneath it
  EXPECT_EQ(tracks[1]["process"], "device cpu");
  EXPECT_EQ(tracks[1]["name"], "stream 7");
  EXPECT_EQ(tracks[1]["host"], false);
  EXPECT_EQ(tracks[1]["depth"], 1);
  const auto& strings = data["strings"];
  const auto& args = data["args"];
  std::multiset<std::string> host_names;
  for (const auto& s : tracks[0]["spans"]) {
    ASSERT_EQ(s.size(), 6u) << s.dump();  // start, dur, depth, name, cat, args
    const std::string name = strings.at(s[3].get<std::size_t>());
    host_names.insert(name);
    const std::string cat = strings.at(s[4].get<std::size_t>());
    EXPECT_EQ(s[2].get<int>(), cat == "op" ? 0 : 1) << s.dump();
    EXPECT_EQ(args.at(s[5].get<std::size_t>())["device"], "cpu");
  }
  EXPECT_EQ(host_names, (std::multiset<std::string>{"conv_fwd", "conv_fwd", "tuner.pick", "tuner.pick",
                                                    "cpu.a", "cpu.a"}));
  const auto& copy = tracks[1]["spans"].back();
  EXPECT_EQ(copy[0], 50000);
  EXPECT_EQ(copy[1], 2500);
  EXPECT_EQ(strings.at(copy[3].get<std::size_t>()), "copy_h2d");
  EXPECT_EQ(args.at(copy[5].get<std::size_t>())["bytes"], 64);
  // The flow: host track 0's first launch (span 2: op, pick, launch) to the stream's first kernel.
  EXPECT_EQ(data["flows"], json::parse("[[0,2,1,0]]"));
  // Identical launches share one argument set.
  EXPECT_EQ(tracks[0]["spans"][2][5], tracks[0]["spans"][5][5]);

  // The tables carry summarize_trace's numbers.
  const TraceSummary summary = summarize_trace(trace);
  ASSERT_EQ(data["ops"].size(), summary.ops.size());
  for (std::size_t i = 0; i < summary.ops.size(); ++i) {
    EXPECT_EQ(data["ops"][i]["op"], summary.ops[i].op);
    EXPECT_EQ(data["ops"][i]["solver"], summary.ops[i].solver);
    EXPECT_EQ(data["ops"][i]["calls"], summary.ops[i].calls);
    EXPECT_DOUBLE_EQ(data["ops"][i]["device_us"].get<double>(), summary.ops[i].device_us);
    EXPECT_DOUBLE_EQ(data["ops"][i]["share"].get<double>(), summary.ops[i].share);
  }
  EXPECT_EQ(data["ops"][0]["op"], "conv_fwd");
  EXPECT_EQ(data["ops"][0]["calls"], 2);
  ASSERT_EQ(data["streams"].size(), 1u);
  const json& stream = data["streams"][0];
  EXPECT_DOUBLE_EQ(stream["total_us"].get<double>(), 47.5);  // 5 .. 52.5
  EXPECT_DOUBLE_EQ(stream["kernel_us"].get<double>(), 32.5);
  EXPECT_DOUBLE_EQ(stream["gap_us"].get<double>(), 15.0);
  EXPECT_DOUBLE_EQ(stream["gap_share"].get<double>(), 15.0 / 47.5);
  EXPECT_EQ(stream["largest_gaps"].size(), 2u);

  // The tuner: two picks, both hits, by source.
  const json& tuner = data["tuner"];
  EXPECT_EQ(tuner["picks"], 2);
  EXPECT_EQ(tuner["hits"], 2);
  EXPECT_EQ(tuner["misses"], 0);
  EXPECT_EQ(tuner["by_source"]["user find-db"], 1);
  EXPECT_EQ(tuner["by_source"]["cache"], 1);
  ASSERT_EQ(tuner["decisions"].size(), 2u);
  EXPECT_EQ(tuner["decisions"][0]["key"], "conv-key");

  // The allocator's history as a series per device: [t_ns, allocated, reserved].
  ASSERT_EQ(data["memory"].size(), 1u);
  EXPECT_EQ(data["memory"][0]["device"], "cpu");
  EXPECT_EQ(data["memory"][0]["points"],
            json::parse("[[2000,4096,2097152],[20000,8192,2097152],[45000,0,2097152]]"));
}

TEST(HtmlReport, TextFromTheTraceCannotInjectMarkup) {
  const std::string page = html_report(hand_made_trace(kHostile, kHostile, false), kHostile);
  // The only "</script>" are the two real closers, and the hostile element appears nowhere raw.
  EXPECT_EQ(count_of(page, "</script>"), 2u);
  EXPECT_EQ(count_of(page, "<b id="), 0u);
  EXPECT_NE(page.find("<title>Galley profile: &lt;/script&gt;&lt;b "
                      "id=&quot;injected&quot;&gt;&amp;amp;&#39;&quot;</title>"),
            std::string::npos);
  // ...and the data still holds the exact text.
  const json data = embedded_data(page);
  ASSERT_TRUE(data.is_object());
  EXPECT_EQ(data["title"], kHostile);
  EXPECT_EQ(data["ops"][0]["op"], kHostile);
  EXPECT_EQ(data["tuner"]["decisions"][0]["key"], kHostile);
  std::set<std::string> strings(data["strings"].begin(), data["strings"].end());
  EXPECT_TRUE(strings.count(kHostile));
}

TEST(HtmlReport, InvalidUtf8InTheTitleIsReplacedNotRefused) {
  // A command line may hold any bytes; the page must still open.
  const json data = embedded_data(html_report(hand_made_trace("conv_fwd", "k", false), "bad \xff title"));
  ASSERT_TRUE(data.is_object());
  EXPECT_EQ(data["title"], "bad \xEF\xBF\xBD title");  // U+FFFD
}

TEST(HtmlReport, NoAllocatorHistoryMeansNoMemorySeries) {
  const json data = embedded_data(html_report(hand_made_trace("conv_fwd", "k", false), "t"));
  ASSERT_TRUE(data.is_object());
  EXPECT_TRUE(data["memory"].is_array());
  EXPECT_TRUE(data["memory"].empty());
}

TEST(HtmlReport, AnEmptyTraceGivesAPage) {
  const json data = embedded_data(html_report(R"({"traceEvents":[]})", "empty"));
  ASSERT_TRUE(data.is_object());
  EXPECT_TRUE(data["tracks"].empty());
  EXPECT_TRUE(data["ops"].empty());
  EXPECT_EQ(data["tuner"]["picks"], 0);
}

TEST(HtmlReport, WhatIsNotATraceIsANamedError) {
  for (const char* text :
       {"", "[1,2]", R"({"traceEvents":{}})", R"({"traceEvents":[{"ph":"X","ts":"a"}]})",
        R"({"traceEvents":[{"ph":"C","name":"memory","ts":1,"pid":1,"args":{"allocated":"x"}}]})"}) {
    try {
      html_report(text, "t");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::corrupt_data) << text << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("not a Galley trace"), std::string::npos) << e.what();
    }
  }
}

TEST(HtmlReport, AnUnwritablePathIsAnIoErrorAndLeavesNoFile) {
  const std::string path = "/nonexistent-galley-folder/report.html";
  try {
    write_html_report(path, hand_made_trace("conv_fwd", "k", false), "t");
    ADD_FAILURE() << "written";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::io_error);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

// Every test leaves the tracer off and empty, as a process starts.
class HtmlReportOfARecordedRun : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override {
    set_enabled(false);
    clear();
  }
};

TEST_F(HtmlReportOfARecordedRun, HoldsTheConvolutionAndTheAllocatorHistory) {
  testing::ScopedEnv mode("GALLEY_FIND_MODE", "off");
  runtime::Stream stream(runtime::device("cpu"));
  const dnn::ConvProblem p =
      dnn::ConvProblem::parse_key("conv-F-f32-nchw-n1-c8-h12-w12-k8-y3-x3-p1-q1-u1-v1-l1-j1-g1");
  auto x = dnn::random_tensor(p.dtype, p.x_desc().elements(), 1);
  auto w = dnn::random_tensor(p.dtype, p.w_desc().elements(), 2);
  set_enabled(true);
  {
    auto device_x = memory::allocate(stream, x.size());
    stream.copy_h2d(device_x.data(), x.data(), x.size());
    std::vector<std::byte> y(p.y_desc().bytes());
    dnn::convolution_forward(stream, p, device_x.data(), w.data(), y.data());
    stream.synchronize();
  }
  set_enabled(false);
  const std::string trace = chrome_trace_json(collect(), dropped());
  const json data = embedded_data(html_report(trace, "recorded"));
  ASSERT_TRUE(data.is_object());

  std::set<std::string> names(data["strings"].begin(), data["strings"].end());
  EXPECT_TRUE(names.count("convolution_forward") || names.count("conv_fwd")) << data["strings"].dump();
  EXPECT_TRUE(names.count("copy_h2d")) << data["strings"].dump();
  bool host = false, device = false;
  for (const auto& t : data["tracks"]) {
    (t["host"].get<bool>() ? host : device) = true;
    EXPECT_FALSE(t["spans"].empty());
  }
  EXPECT_TRUE(host && device) << data["tracks"].dump();
  // The allocation and its free: allocated bytes rise, then fall back.
  ASSERT_EQ(data["memory"].size(), 1u) << data["memory"].dump();
  EXPECT_EQ(data["memory"][0]["device"], "cpu");
  const auto& points = data["memory"][0]["points"];
  ASSERT_GE(points.size(), 2u);
  std::int64_t peak = 0;
  for (const auto& pt : points) peak = std::max(peak, pt[1].get<std::int64_t>());
  EXPECT_GE(peak, static_cast<std::int64_t>(x.size()));
  EXPECT_LT(points.back()[1].get<std::int64_t>(), peak);
  EXPECT_EQ(data["tuner"]["picks"], 1);
  // The convolution's row (by device time it may come after the copy's on a busy machine).
  bool conv_row = false;
  for (const auto& row : data["ops"]) conv_row |= row["solver"].get<std::string>().starts_with("cpu.conv.");
  EXPECT_TRUE(conv_row) << data["ops"].dump();
}

// ---- galley prof --html ----

std::filesystem::path scratch(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("galley-html-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(GalleyProfHtml, WritesTheReportOfABenchRunAndNoTraceBesideIt) {
  const auto folder = scratch("alone");
  std::filesystem::create_directories(folder);
  const auto html = folder / "report.html";
  const auto r = galley::testing::run_command("timeout -s KILL 120 " + kGalley + " prof --html " +
                                              html.string() + " -- " + kSmallConv + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("HTML report written to " + html.string()), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("trace written to"), std::string::npos) << r.output;
  // The temporary trace is gone: the folder holds the report alone.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    files.push_back(entry.path().filename());
  EXPECT_EQ(files, std::vector<std::string>{"report.html"});
  const std::string page = read(html);
  const json data = embedded_data(page);
  ASSERT_TRUE(data.is_object());
  EXPECT_NE(page.find("<title>Galley profile: galley " + kSmallConv + "</title>"), std::string::npos);
  bool conv_solver = false;
  for (const auto& row : data["ops"])
    conv_solver |= row["solver"].get<std::string>().starts_with("cpu.conv.");
  EXPECT_TRUE(conv_solver) << data["ops"].dump();
  EXPECT_FALSE(data["memory"].empty());
  EXPECT_GT(data["tuner"]["picks"].get<int>(), 0);
}

TEST(GalleyProfHtml, WithOutKeepsTheTraceAndInRendersIt) {
  const auto trace = scratch("kept.json");
  const auto html = scratch("kept.html");
  const auto again = scratch("again.html");
  const auto r =
      galley::testing::run_command("timeout -s KILL 120 " + kGalley + " prof --out " + trace.string() +
                                   " --html " + html.string() + " --summary -- " + kSmallConv + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("trace written to"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("T_total"), std::string::npos) << r.output;
  ASSERT_TRUE(std::filesystem::exists(trace));
  const auto in = galley::testing::run_command(kGalley + " prof --in " + trace.string() + " --html " +
                                               again.string() + " 2>&1");
  ASSERT_EQ(in.exit_code, 0) << in.output;
  EXPECT_EQ(in.output.find("T_total"), std::string::npos) << "--in with --html prints no summary unasked\n"
                                                          << in.output;
  // Both reports hold the same data but for their titles.
  json a = embedded_data(read(html)), b = embedded_data(read(again));
  ASSERT_TRUE(a.is_object() && b.is_object());
  EXPECT_EQ(b["title"], "trace " + trace.string());
  a.erase("title");
  b.erase("title");
  EXPECT_EQ(a, b);
}

TEST(GalleyProfHtml, BadUseIsANamedError) {
  struct Case {
    std::string args, named;
  };
  const Case cases[] = {
      {"prof --html /nonexistent-galley-folder/r.html -- info", "--html='/nonexistent-galley-folder/r.html'"},
      {"prof --in /tmp/a.json --html /nonexistent-galley-folder/r.html",
       "--html='/nonexistent-galley-folder"},
      {"prof --memory /tmp/s.json --html /tmp/r.html", "--memory shows a memory snapshot"},
      {"prof --html /tmp/r.html", "needs a galley command after '--'"},
  };
  for (const auto& c : cases) {
    const auto r = galley::testing::run_command(kGalley + " " + c.args + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find("galley: error"), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.named), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace galley::profile

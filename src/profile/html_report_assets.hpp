// The HTML report's style sheet and script: html_report.css and html_report.js in this folder,
// turned into strings at build time (embed_assets.cmake) so they stay ordinary, lintable files.
#pragma once

#include <string_view>

namespace galley::profile::assets {

std::string_view html_report_css() noexcept;
std::string_view html_report_js() noexcept;

}  // namespace galley::profile::assets

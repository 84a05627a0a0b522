// `ddlsim run --plot`: the experiment's figure, drawn by its script of plots/ with a python3 that has
// matplotlib.
//
//   cli::draw_plot("plot_bm.py", "results/gpipe_bm.csv", "results/gpipe_bm.png");
//
// The interpreter is $DDLSIM_PYTHON when set, else the first of `python3` on PATH and
// /usr/bin/python3 (Debian's, which sees python3-matplotlib) that can import matplotlib. Throws ddlsim::Error naming what failed:
// no such python, or the script's own message.
#pragma once

#include <string>

namespace ddlsim::cli {

/// Runs plots/<script> CSV -o PNG. Throws Error when no python3 with matplotlib is found or the
/// script fails.
void draw_plot(const std::string& script, const std::string& csv, const std::string& png);

}  // namespace ddlsim::cli
